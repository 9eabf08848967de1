/* Draw an ECharts option (an explorer's chart, as batchlab.page.web answers it) into a fresh box of
 * `width` × `height` CSS pixels on a page of colour `background`, as book/_js/live.js draws it (SVG), with
 * the animation off so the end state is drawn at once (tests/test_explorer_labels.py,
 * tests/test_page_dark.py measure it with chart_ink.js). */
([option, width, height, background]) => {
  document.body.textContent = '';
  document.body.style.margin = '0';
  document.body.style.background = background;
  const box = document.createElement('div');
  box.className = 'bl-live-chart';
  box.style.width = width + 'px';
  box.style.height = height + 'px';
  document.body.appendChild(box);
  const still = o => Object.assign({}, o, {animation: false});
  const shown = option.baseOption ? Object.assign({}, option, {baseOption: still(option.baseOption)}) : still(option);
  echarts.init(box, null, {renderer: 'svg'}).setOption(shown, true);
  return true;
}
