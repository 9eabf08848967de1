/* True once JupyterLab (window.jupyterapp) shows the notebook at `path` with its session:
 * tests/test_live_kernel.py waits for it before running the cells. */
(path) => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return !!(w && w.context && w.context.path === path && w.sessionContext);
}
