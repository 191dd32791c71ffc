// The generator page: builds its form from GET /api/schema, and on every change asks POST /api/render for the
// files. Every rule (defaults, forced values, impossible combinations) is the generator's: the page only shows
// what the server answers. State: the options the user chose, in the query string; the open tab and file, the
// colour theme and line wrapping in the hash, so that a link restores the page.
'use strict';
(function () {
  const $ = (sel) => document.querySelector(sel);
  const el = (tag, attrs = {}, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === 'text') e.textContent = v; else if (v !== undefined && v !== null) e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  };

  // Fields that only matter when processes are started together; hidden while distributed is off. The backend
  // is always shown: xla-tpu can be picked directly (it forces spawn).
  const kDistributedOnly = ['nproc_per_node', 'nnodes', 'node_rank', 'master_addr', 'master_port',
                            'tpu_chips_per_host'];
  // Fields that only matter for one backend.
  const kBackendOnly = { tpu_chips_per_host: 'xla-tpu' };

  let schema = [];           // option_schema()
  let specs = {};            // key -> schema entry
  let choices = {};          // what the user set (sent to the server)
  let displaced = {};        // choices a later one overrode (distributed launch, then backend xla-tpu): offered again
  let lastGood = null;       // last answer of /api/render without problems
  let view = { tab: null, file: null, theme: null, wrap: false };
  let pending = null;        // debounce timer
  let generation = 0;        // answers of older requests are dropped

  // ----- state <-> URL -----
  function parseValue(key, raw) {
    const spec = specs[key];
    if (!spec) return raw;  // unknown key: the server names it
    if (spec.type === 'int' && /^-?\d+$/.test(raw)) return Number(raw);
    if (spec.type === 'number' && raw.trim() !== '' && Number.isFinite(Number(raw))) return Number(raw);
    if (spec.type === 'bool' && (raw === 'true' || raw === 'false')) return raw === 'true';
    return raw;
  }
  function readUrl() {
    const q = new URLSearchParams(location.search);
    choices = {};
    for (const [k, v] of q) choices[k] = parseValue(k, v);
    const h = new URLSearchParams(location.hash.slice(1));
    view.tab = h.get('tab');
    view.file = h.get('file');
    view.theme = ['dark', 'light'].includes(h.get('theme')) ? h.get('theme') : null;
    view.wrap = h.get('wrap') === '1';
  }
  function writeUrl() {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(choices)) q.set(k, String(v));
    const h = new URLSearchParams();
    if (view.tab) h.set('tab', view.tab);
    if (view.file) h.set('file', view.file);
    if (view.theme) h.set('theme', view.theme);
    if (view.wrap) h.set('wrap', '1');
    const url = location.pathname + (q.toString() ? '?' + q : '') + (h.toString() ? '#' + h : '');
    history.replaceState(null, '', url);
  }

  // ----- talking to the server -----
  async function post(endpoint, options) {
    const res = await fetch('/api/' + endpoint, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(options),
    });
    return res;
  }
  // Refused options are an answer of 200 with `problems` (not an HTTP error); other statuses are failures.
  async function renderJson(options) {
    const res = await post('render', options);
    let body = null;
    try { body = await res.json(); } catch (e) { body = { error: 'the server answered ' + res.status }; }
    return { status: res.status, body };
  }
  const problemsOf = (answer) => answer.body.problems || [];
  const isGood = (answer) => answer.status === 200 && problemsOf(answer).length === 0 && !!answer.body.files;

  // Asks for the files of the current choices. When the latest change conflicts with an earlier choice, the
  // latest wins: earlier choices the generator rejects are left out (the generator then picks or forces them),
  // but only when that makes the problem go away. A choice left out because the generator forces another value
  // (distributed launch under backend xla-tpu) is kept aside and offered again with each change: it comes back
  // as soon as it fits again (backend back to gloo), instead of falling to its default.
  async function refresh(changedKey) {
    const mine = ++generation;
    const offered = Object.keys(displaced).filter((k) => !(k in choices) && k !== changedKey);
    let request = { ...choices };
    for (const k of offered) request[k] = displaced[k];
    const nextDisplaced = { ...displaced };
    let answer = await renderJson(request);
    if (answer.status === 200 && problemsOf(answer).length && changedKey) {
      const conflicting = [...new Set(problemsOf(answer).map((p) => p.option))]
        .filter((k) => k !== changedKey && k in request);
      if (conflicting.length) {
        const retry = { ...request };
        for (const k of conflicting) delete retry[k];
        const second = await renderJson(retry);
        const still = problemsOf(second).some((p) => conflicting.includes(p.option));
        if (second.status === 200 && !still) {
          const forcedNow = new Set((second.body.forced || []).map((f) => f.option));
          for (const k of conflicting) {
            if (forcedNow.has(k)) nextDisplaced[k] = request[k]; else delete nextDisplaced[k];
          }
          request = retry;
          answer = second;
        }
      }
    }
    if (mine !== generation) return;
    // An offered choice that was accepted, or one the user set again, is no longer aside.
    for (const k of Object.keys(nextDisplaced)) if (k in request) delete nextDisplaced[k];
    displaced = nextDisplaced;
    choices = request;
    writeUrl();
    show(answer);
    document.body.dataset.busy = 'false';
  }
  function scheduleRefresh(changedKey) {
    document.body.dataset.busy = 'true';
    clearTimeout(pending);
    pending = setTimeout(() => refresh(changedKey), 120);
  }

  // ----- the form -----
  function fieldInput(spec) {
    const id = 'opt-' + spec.key;
    let input;
    if (spec.type === 'list') {
      // Several of the choices at once: a box each; none ticked is "none".
      input = el('div', { id, class: 'choices', role: 'group', 'aria-labelledby': 'label-' + spec.key });
      for (const c of spec.choices) {
        const box = el('input', { id: id + '-' + c, name: spec.key, type: 'checkbox', value: c });
        input.append(el('label', { class: 'choice', for: box.id }, box, ' ' + c));
      }
    } else if (spec.type === 'enum') {
      input = el('select', { id, name: spec.key });
      for (const c of spec.choices) input.append(el('option', { value: c, text: c }));
    } else if (spec.type === 'bool') {
      input = el('input', { id, name: spec.key, type: 'checkbox' });
    } else if (spec.type === 'int' || spec.type === 'number') {
      input = el('input', { id, name: spec.key, type: 'number', step: spec.type === 'int' ? '1' : 'any',
                            min: spec.min, max: spec.max });
    } else {
      input = el('input', { id, name: spec.key, type: 'text', spellcheck: 'false' });
    }
    const read = () => {
      if (spec.type === 'list') {
        const names = [...input.querySelectorAll('input:checked')].map((b) => b.value);
        return names.length ? names.join(',') : 'none';
      }
      if (spec.type === 'bool') return input.checked;
      if (spec.type === 'enum' || spec.type === 'string') return input.value;
      return parseValue(spec.key, input.value);
    };
    const onChange = spec.type === 'enum' || spec.type === 'bool' || spec.type === 'list';
    input.addEventListener(onChange ? 'change' : 'input', () => {
      choices[spec.key] = read();
      scheduleRefresh(spec.key);
    });
    return input;
  }

  function buildForm(templates) {
    const picker = $('#templates');
    for (const t of templates) {
      const radio = el('input', { type: 'radio', name: 'template', value: t.id, id: 'template-' + t.id });
      radio.addEventListener('change', () => { choices.template = t.id; view.file = null; scheduleRefresh('template'); });
      picker.append(el('label', { class: 'template-card', for: 'template-' + t.id },
                       radio, el('span', {}, el('strong', { text: t.title }), el('small', { text: t.description }))));
    }
    const groups = [...new Set(schema.map((s) => s.group))];
    if (!view.tab || !groups.includes(view.tab)) view.tab = groups.includes('Training') ? 'Training' : groups[0];
    for (const g of groups) {
      const tab = el('button', { type: 'button', role: 'tab', id: 'tab-' + g, 'aria-controls': 'panel-' + g,
                                 text: g });
      tab.addEventListener('click', () => { view.tab = g; showTab(); writeUrl(); });
      $('#tabs').append(tab);
      const panel = el('div', { class: 'panel', role: 'tabpanel', id: 'panel-' + g, 'aria-labelledby': 'tab-' + g });
      for (const spec of schema.filter((s) => s.group === g && s.key !== 'template')) {
        const input = fieldInput(spec);
        // A group of boxes is named by its label's id; a single field by the label's `for`.
        const label = spec.type === 'list' ? el('span', { class: 'label', id: 'label-' + spec.key, text: spec.label })
                                           : el('label', { for: input.id, text: spec.label });
        const row = el('div', { class: 'field', 'data-key': spec.key });
        if (spec.type === 'bool') row.append(label, el('div', {}, input)); else row.append(label, input);
        row.append(el('div', { class: 'help', text: spec.help + ' (' + spec.flag + ')' }),
                   el('div', { class: 'hint', hidden: '' }), el('div', { class: 'error', role: 'alert', hidden: '' }));
        panel.append(row);
      }
      $('#panels').append(panel);
    }
    showTab();
  }
  function showTab() {
    for (const b of document.querySelectorAll('#tabs button')) {
      const on = b.id === 'tab-' + view.tab;
      b.setAttribute('aria-selected', on ? 'true' : 'false');
      document.getElementById(b.getAttribute('aria-controls')).hidden = !on;
    }
  }

  // ----- showing an answer -----
  function show(answer) {
    const body = answer.body;
    const options = body.options || {};
    const problems = {};
    for (const p of body.problems || []) (problems[p.option] = problems[p.option] || []).push(p.message);
    const forced = {};
    for (const f of body.forced || []) forced[f.option] = f.message;

    for (const r of document.querySelectorAll('#templates input')) r.checked = r.value === options.template;
    for (const row of document.querySelectorAll('.field')) {
      const key = row.dataset.key;
      const error = problems[key];
      if (specs[key] && specs[key].type === 'list') {
        showList(row, key, options, error, key in forced);
      } else {
        showField(row, key, options, error, key in forced);
      }
      const hint = row.querySelector('.hint');
      hint.hidden = !(key in forced);
      hint.textContent = forced[key] || '';
      const err = row.querySelector('.error');
      err.hidden = !error;
      err.textContent = error ? error.join('; ') : '';
      let hidden = kDistributedOnly.includes(key) && options.distributed === 'off' && !error;
      if (kBackendOnly[key] && options.backend !== kBackendOnly[key] && !error) hidden = true;
      row.hidden = hidden;
    }
    showRest(answer, body);
  }

  // One field: the generator's value; a value the generator rejected stays as typed, so that it can be corrected.
  function showField(row, key, options, error, isForced) {
    const input = row.querySelector('input, select');
    // A field being typed in keeps its text, unless the generator now forces it (it is disabled then).
    if (!error && key in options && (document.activeElement !== input || isForced)) {
      if (input.type === 'checkbox') input.checked = !!options[key]; else input.value = String(options[key]);
    } else if (error && key in choices && document.activeElement !== input && input.type !== 'checkbox') {
      input.value = String(choices[key]);
    }
    input.disabled = isForced;
    if (error) input.setAttribute('aria-invalid', 'true'); else input.removeAttribute('aria-invalid');
  }

  // A group of boxes: ticked as the generator's list says; after an error, as the user chose (text "a,b").
  function showList(row, key, options, error, isForced) {
    const group = row.querySelector('.choices');
    let names = null;
    if (!error && Array.isArray(options[key])) names = options[key];
    else if (error && typeof choices[key] === 'string') names = choices[key].split(',').map((n) => n.trim());
    for (const box of group.querySelectorAll('input')) {
      if (names) box.checked = names.includes(box.value);
      box.disabled = isForced;
    }
    if (error) group.setAttribute('aria-invalid', 'true'); else group.removeAttribute('aria-invalid');
  }

  function showRest(answer, body) {
    // Problems that belong to no field of the form (an unknown key from a hand-edited link, the template).
    const fieldKeys = new Set([...document.querySelectorAll('.field')].map((r) => r.dataset.key));
    const loose = (body.problems || []).filter((p) => !fieldKeys.has(p.option)).map((p) => p.option + ': ' + p.message);
    if (answer.status !== 200 && !(body.problems && body.problems.length)) {
      loose.push(body.error || 'the server answered ' + answer.status);
    }
    const banner = $('#banner');
    banner.hidden = loose.length === 0;
    banner.textContent = loose.join('\n');

    const ok = isGood(answer);
    for (const b of ['#download-zip', '#download-notebook', '#copy-command']) $(b).disabled = !ok;
    if (ok) {
      lastGood = body;
      $('#command').textContent = body.command;
    }
    $('#stale').hidden = ok || !lastGood;
    if (lastGood) showFiles(lastGood);
  }

  function showFiles(project) {
    const paths = Object.keys(project.files).sort();
    if (!view.file || !(view.file in project.files)) {
      view.file = paths.find((p) => p === 'README.md') || paths.find((p) => p.endsWith('.cpp')) || paths[0];
      writeUrl();
    }
    // Nest the paths into folders.
    const root = {};
    for (const p of paths) {
      let node = root;
      const parts = p.split('/');
      parts.slice(0, -1).forEach((d) => { node = node[d + '/'] = node[d + '/'] || {}; });
      node[parts[parts.length - 1]] = p;
    }
    const list = (node) => {
      const ul = el('ul');
      const entries = Object.entries(node).sort(([a, av], [b, bv]) =>
        (typeof av === 'string') - (typeof bv === 'string') || a.localeCompare(b));
      for (const [name, value] of entries) {
        if (typeof value === 'string') {
          const b = el('button', { type: 'button', 'data-path': value, text: name,
                                   'aria-current': value === view.file ? 'true' : 'false' });
          b.addEventListener('click', () => { view.file = value; writeUrl(); showFiles(lastGood); });
          ul.append(el('li', {}, b));
        } else {
          ul.append(el('li', {}, el('span', { class: 'dir', text: name }), list(value)));
        }
      }
      return ul;
    };
    $('#tree').replaceChildren(list(root));
    $('#preview-path').textContent = project.name + '/' + view.file;
    $('#preview code').innerHTML = window.VoltHighlight.highlight(view.file, project.files[view.file]);
    $('#preview').dataset.path = view.file;
  }

  // ----- the look: colour theme, line wrapping, pane widths -----
  const systemDark = window.matchMedia('(prefers-color-scheme: dark)');
  function showTheme() {
    const root = document.documentElement;
    if (view.theme) root.dataset.theme = view.theme; else delete root.dataset.theme;
    const dark = view.theme ? view.theme === 'dark' : systemDark.matches;
    const button = $('#theme-toggle');
    button.setAttribute('aria-pressed', dark ? 'true' : 'false');
    button.textContent = dark ? 'Light mode' : 'Dark mode';
    button.title = (view.theme ? 'chosen here' : 'following the system') + '; click for ' + (dark ? 'light' : 'dark');
  }
  function toggleTheme() {
    const dark = view.theme ? view.theme === 'dark' : systemDark.matches;
    view.theme = dark ? 'light' : 'dark';
    showTheme();
    writeUrl();
  }
  function showWrap() {
    $('#wrap-lines').checked = view.wrap;
    $('#preview').classList.toggle('wrap', view.wrap);
  }

  // A drag handle between two panes: dragging (or the arrow keys) sets `variable` on `container` to the width of
  // the pane before the handle, kept between `min` and the container's width less `keep` for the pane after it.
  function resizable(handle, container, pane, variable, min, keep) {
    const setWidth = (px) => {
      const max = Math.max(min, container.getBoundingClientRect().width - keep);
      container.style.setProperty(variable, Math.round(Math.min(max, Math.max(min, px))) + 'px');
    };
    handle.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      e.preventDefault();
      const startX = e.clientX;
      const startWidth = pane.getBoundingClientRect().width;
      handle.setPointerCapture(e.pointerId);
      handle.classList.add('dragging');
      const move = (m) => setWidth(startWidth + m.clientX - startX);
      const up = () => {
        handle.classList.remove('dragging');
        handle.removeEventListener('pointermove', move);
        handle.removeEventListener('pointerup', up);
        handle.removeEventListener('pointercancel', up);
      };
      handle.addEventListener('pointermove', move);
      handle.addEventListener('pointerup', up);
      handle.addEventListener('pointercancel', up);
    });
    handle.addEventListener('keydown', (e) => {
      const step = e.key === 'ArrowLeft' ? -16 : e.key === 'ArrowRight' ? 16 : 0;
      if (!step) return;
      e.preventDefault();
      setWidth(pane.getBoundingClientRect().width + step);
    });
  }

  // ----- exports -----
  async function download(endpoint, fallbackName) {
    const res = await post(endpoint, choices);
    if (res.status !== 200) {
      const body = await res.json().catch(() => ({}));
      show({ status: res.status, body });
      return;
    }
    const disposition = res.headers.get('Content-Disposition') || '';
    const m = /filename="([^"]+)"/.exec(disposition);
    const url = URL.createObjectURL(await res.blob());
    const a = el('a', { href: url, download: m ? m[1] : fallbackName });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }
  // Puts `text` on the clipboard; without the permission, selects `node` so that Ctrl-C copies it.
  async function copy(text, node, status) {
    try {
      await navigator.clipboard.writeText(text);
    } catch (e) {
      const range = document.createRange();
      range.selectNodeContents(node);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      status.textContent = 'selected: press Ctrl-C to copy';
      return;
    }
    status.textContent = 'copied';
    clearTimeout(status.timer);
    status.timer = setTimeout(() => { status.textContent = ''; }, 2000);
  }
  const copyCommand = () => copy($('#command').textContent, $('#command'), $('#copy-status'));
  // The file's exact text from the answer (the preview's DOM also holds the line numbers).
  const copyFile = () => {
    if (!lastGood || !(view.file in lastGood.files)) return;
    copy(lastGood.files[view.file], $('#preview code'), $('#copy-file-status'));
  };

  async function start() {
    const res = await fetch('/api/schema');
    const data = await res.json();
    schema = data.options;
    specs = Object.fromEntries(schema.map((s) => [s.key, s]));
    $('#version').textContent = 'generator ' + data.version;
    readUrl();
    showTheme();
    showWrap();
    systemDark.addEventListener('change', showTheme);
    $('#theme-toggle').addEventListener('click', toggleTheme);
    $('#wrap-lines').addEventListener('change', () => { view.wrap = $('#wrap-lines').checked; showWrap(); writeUrl(); });
    resizable($('#resize-settings'), $('#layout'), $('#settings'), '--settings-width', 300, 360);
    resizable($('#resize-tree'), $('#browser'), $('#tree'), '--tree-width', 100, 240);
    buildForm(data.templates);
    $('#download-zip').addEventListener('click', () => download('zip', 'project.zip'));
    $('#download-notebook').addEventListener('click', () => download('notebook', 'project.ipynb'));
    $('#copy-command').addEventListener('click', copyCommand);
    $('#copy-file').addEventListener('click', copyFile);
    await refresh(null);
    document.body.dataset.ready = 'true';
  }
  start().catch((e) => {
    const banner = $('#banner');
    banner.hidden = false;
    banner.textContent = 'The page could not start: ' + e.message;
  });
})();
