// A small syntax highlighter for the files the generator writes (C++, CMake, YAML, shell, Python, JSON,
// Markdown): each language is a list of token rules tried in order at each position; the first that matches
// wins. Written for this page, so that it loads nothing from elsewhere.
'use strict';
(function () {
  const escape = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const words = (list) => new RegExp('\\b(?:' + list.split(' ').join('|') + ')\\b', 'y');

  const languages = {
    cpp: [
      ['comment', /\/\/[^\n]*/y], ['comment', /\/\*[\s\S]*?(?:\*\/|$)/y],
      ['preproc', /^[ \t]*#[ \t]*\w+(?:[ \t]*<[^>\n]*>)?/my],
      ['string', /R"([^(\s]*)\([\s\S]*?\)\1"/y], ['string', /"(?:[^"\\\n]|\\.)*"/y], ['string', /'(?:[^'\\\n]|\\.)+'/y],
      ['keyword', words('auto bool break case catch char class const constexpr continue default delete do double ' +
        'else enum explicit extern false float for friend if inline int int64_t long namespace new noexcept nullptr ' +
        'operator override private protected public return short signed size_t sizeof static static_cast std struct ' +
        'switch template this throw true try typedef typename uint64_t union unsigned using virtual void volatile while')],
      ['number', /\b(?:0x[\da-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?)[fFuUlL]*\b/y],
    ],
    cmake: [
      ['comment', /#[^\n]*/y], ['string', /"(?:[^"\\]|\\.)*"/y], ['var', /\$\{[^}\n]*\}/y],
      ['keyword', /\b[A-Za-z_]\w*(?=[ \t]*\()/y], ['number', /\b\d+(?:\.\d+)*\b/y],
    ],
    yaml: [
      ['comment', /#[^\n]*/y], ['key', /^[ \t-]*[\w.\-]+(?=[ \t]*:)/my], ['string', /"(?:[^"\\\n]|\\.)*"|'[^'\n]*'/y],
      ['keyword', words('true false null yes no')], ['number', /-?\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b/y],
    ],
    shell: [
      ['comment', /#[^\n]*/y], ['string', /"(?:[^"\\]|\\.)*"|'[^']*'/y], ['var', /\$\{[^}\n]*\}|\$\w+/y],
      ['keyword', words('if then else elif fi for in do done while case esac function export set cd echo exit')],
      ['number', /\b\d+\b/y],
    ],
    python: [
      ['comment', /#[^\n]*/y], ['string', /"""[\s\S]*?"""|'''[\s\S]*?'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'/y],
      ['keyword', words('and as assert break class continue def del elif else except False finally for from if ' +
        'import in is lambda None not or pass raise return True try while with yield')],
      ['number', /\b\d+(?:\.\d+)?\b/y],
    ],
    json: [
      ['key', /"(?:[^"\\\n]|\\.)*"(?=\s*:)/y], ['string', /"(?:[^"\\\n]|\\.)*"/y],
      ['keyword', words('true false null')], ['number', /-?\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b/y],
    ],
    markdown: [
      ['heading', /^#{1,6}[^\n]*/my], ['string', /```[\s\S]*?(?:```|$)/y], ['string', /`[^`\n]+`/y],
      ['keyword', /\*\*[^*\n]+\*\*/y],
    ],
  };

  function languageOf(path) {
    const name = path.split('/').pop();
    if (name === 'CMakeLists.txt' || name.endsWith('.cmake')) return 'cmake';
    const ext = name.includes('.') ? name.split('.').pop().toLowerCase() : '';
    return { cpp: 'cpp', cc: 'cpp', cxx: 'cpp', h: 'cpp', hpp: 'cpp', yaml: 'yaml', yml: 'yaml', sh: 'shell',
             sbatch: 'shell', bash: 'shell', py: 'python', json: 'json', ipynb: 'json', md: 'markdown' }[ext] || null;
  }

  // Returns HTML: the text escaped, tokens wrapped in <span class="tok-KIND">, and one line number per line.
  function highlight(path, text) {
    const rules = languages[languageOf(path)] || [];
    let html = '';
    let plain = '';
    let pos = 0;
    outer: while (pos < text.length) {
      for (const [kind, re] of rules) {
        re.lastIndex = pos;
        const m = re.exec(text);
        if (m && m[0].length > 0) {
          html += escape(plain);
          plain = '';
          html += '<span class="tok-' + kind + '">' + escape(m[0]) + '</span>';
          pos += m[0].length;
          continue outer;
        }
      }
      // No rule here: consume a whole word (so that keywords are not found inside identifiers) or one character.
      const word = /[A-Za-z_]\w*/y;
      word.lastIndex = pos;
      const w = word.exec(text);
      const step = w ? w[0].length : 1;
      plain += text.substr(pos, step);
      pos += step;
    }
    html += escape(plain);
    // Spans never cross lines in the output: split, then re-open the open span on the next line.
    const lines = html.split('\n');
    let open = '';
    return lines.map((line, i) => {
      const out = open + line;
      const opens = [...line.matchAll(/<span class="[^"]*">|<\/span>/g)];
      for (const m of opens) open = m[0] === '</span>' ? '' : m[0];
      const closing = open ? '</span>' : '';
      return '<span class="ln">' + (i + 1) + '</span>' + out + closing;
    }).join('\n');
  }

  window.VoltHighlight = { highlight, languageOf };
})();
