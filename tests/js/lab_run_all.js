/* Run every cell of JupyterLab's current notebook: resolves with what notebook:run-all-cells returns
 * (true when every cell ran, false if one failed) or "timeout" after `ms` (page.evaluate has no limit
 * of its own). tests/test_live_kernel.py. */
async (ms) => {
  const app = window.jupyterapp, w = app.shell.currentWidget;
  await w.context.ready;
  await w.sessionContext.ready;
  return await Promise.race([app.commands.execute('notebook:run-all-cells'),
                             new Promise(done => setTimeout(() => done('timeout'), ms))]);
}
