// The preview's highlighting: Debian's Prism (node-prismjs, embedded as /assets/prism.js) tokenizes the files the
// generator writes (C++, CMake, YAML, shell, Python, JSON, Markdown); this file picks the language from the path
// and numbers the lines. Anything else is shown as plain, escaped text.
'use strict';
(function () {
  const escape = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

  function languageOf(path) {
    const name = path.split('/').pop();
    if (name === 'CMakeLists.txt' || name.endsWith('.cmake')) return 'cmake';
    const ext = name.includes('.') ? name.split('.').pop().toLowerCase() : '';
    return { cpp: 'cpp', cc: 'cpp', cxx: 'cpp', h: 'cpp', hpp: 'cpp', yaml: 'yaml', yml: 'yaml', sh: 'bash',
             sbatch: 'bash', bash: 'bash', py: 'python', json: 'json', ipynb: 'json', md: 'markdown' }[ext] || null;
  }

  // Returns HTML: Prism's tokens as <span class="token KIND">, and one line number per line. A token that spans
  // lines (a block comment, a fenced code block) is closed at the end of each line and opened again on the next,
  // so that every line is whole on its own.
  function highlight(path, text) {
    const language = languageOf(path);
    const grammar = language && window.Prism ? window.Prism.languages[language] : null;
    const html = grammar ? window.Prism.highlight(text, grammar, language) : escape(text);
    const open = [];  // the opening tags of the spans open at the start of the current line
    return html.split('\n').map((line, i) => {
      const out = open.join('') + line;
      for (const m of line.matchAll(/<span\b[^>]*>|<\/span>/g)) {
        if (m[0] === '</span>') open.pop(); else open.push(m[0]);
      }
      return '<span class="ln">' + (i + 1) + '</span>' + out + '</span>'.repeat(open.length);
    }).join('\n');
  }

  window.VoltHighlight = { highlight, languageOf };
})();
