/* The errors ("name: value") in the outputs of JupyterLab's current notebook (tests/test_live_kernel.py). */
() => {
  const errors = [];
  for (const cell of window.jupyterapp.shell.currentWidget.content.model.cells) {
    if (cell.type !== 'code') continue;
    for (const out of cell.toJSON().outputs || [])
      if (out.output_type === 'error') errors.push(`${out.ename}: ${out.evalue}`);
  }
  return errors;
}
