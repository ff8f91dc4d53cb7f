// The symbol library of the picture editor: each makes the SVG text of a
// group with the given id at (x, y). Parts meant for bindings have ids of
// their own: <id>-body (fill, stroke: the state), <id>-level (level),
// <id>-value (text), <id>-rotor (rotate).
const esc = s => String(s).replace(/[^A-Za-z0-9_-]/g, '');

export const symbols = {
  tank: (id, x, y) => `<g id="${esc(id)}" transform="translate(${x},${y})">
<rect id="${esc(id)}-body" width="80" height="120" rx="8" fill="#e8eef5" stroke="#333" stroke-width="2"/>
<rect id="${esc(id)}-level" x="4" y="4" width="72" height="112" rx="4" fill="#4a90d9"/>
<text id="${esc(id)}-value" x="40" y="140" text-anchor="middle" font-size="14">—</text></g>`,
  pump: (id, x, y) => `<g id="${esc(id)}" transform="translate(${x},${y})">
<circle id="${esc(id)}-body" cx="30" cy="30" r="28" fill="#bbb" stroke="#333" stroke-width="2"/>
<polygon points="18,14 48,30 18,46" fill="#fff" stroke="#333"/>
<text id="${esc(id)}-value" x="30" y="78" text-anchor="middle" font-size="14">—</text></g>`,
  valve: (id, x, y) => `<g id="${esc(id)}" transform="translate(${x},${y})">
<polygon id="${esc(id)}-body" points="0,0 60,40 60,0 0,40" fill="#bbb" stroke="#333" stroke-width="2"/>
<text id="${esc(id)}-value" x="30" y="60" text-anchor="middle" font-size="14">—</text></g>`,
  pipe: (id, x, y) => `<g id="${esc(id)}" transform="translate(${x},${y})">
<rect id="${esc(id)}-body" width="200" height="12" fill="#888" stroke="#333"/></g>`,
  motor: (id, x, y) => `<g id="${esc(id)}" transform="translate(${x},${y})">
<rect id="${esc(id)}-body" width="70" height="50" rx="6" fill="#bbb" stroke="#333" stroke-width="2"/>
<g id="${esc(id)}-rotor"><circle cx="35" cy="25" r="16" fill="#fff" stroke="#333"/><line x1="35" y1="11" x2="35" y2="39" stroke="#333" stroke-width="3"/></g>
<text id="${esc(id)}-value" x="35" y="68" text-anchor="middle" font-size="14">—</text></g>`,
  sensor: (id, x, y) => `<g id="${esc(id)}" transform="translate(${x},${y})">
<circle id="${esc(id)}-body" cx="20" cy="20" r="18" fill="#fff" stroke="#333" stroke-width="2"/>
<text x="20" y="25" text-anchor="middle" font-size="12">${esc(id).slice(0, 2).toUpperCase()}</text>
<text id="${esc(id)}-value" x="20" y="58" text-anchor="middle" font-size="14">—</text></g>`,
};

export const symbolNames = Object.keys(symbols);
