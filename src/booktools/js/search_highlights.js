// What sphinx_highlight.js left on the page after a search: [highlighted words, 「隐藏搜索结果」 links].
() => [document.querySelectorAll('.highlighted').length, document.querySelectorAll('.highlight-link').length]
