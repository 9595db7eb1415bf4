// A small, safe markdown renderer for what chat models write: paragraphs, headings,
// lists, block quotes, fenced code blocks, inline code, bold, italic and links.
// It builds DOM nodes and sets every piece of source text with createTextNode, so
// nothing the model writes is ever parsed as HTML: "<script>" stays text. Links
// keep only http(s) and mailto targets. An unclosed fence (a reply still streaming)
// renders as a code block up to the end.

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^ {0,3}([-*+])\s+(.*)$/;
const ORDERED = /^ {0,3}(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const SAFE_URL = /^(https?:\/\/|mailto:)/i;

function el(tag, children = []) {
  const node = document.createElement(tag);
  for (const child of children) node.append(child);
  return node;
}

/** Renders `source` into a DocumentFragment. */
export function renderMarkdown(source) {
  const fragment = document.createDocumentFragment();
  for (const block of parseBlocks(source.replace(/\r\n?/g, "\n").split("\n"))) {
    fragment.append(block);
  }
  return fragment;
}

function parseBlocks(lines) {
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i++;
    } else if ((m = FENCE.exec(line))) {
      const end = lines.findIndex(
        (l, j) => j > i && l.trim().startsWith(m[1][0].repeat(m[1].length)) && !l.trim().slice(m[1].length).trim()
      );
      const body = lines.slice(i + 1, end === -1 ? lines.length : end);
      const code = el("code", [document.createTextNode(body.join("\n"))]);
      if (m[2]) code.dataset.lang = m[2];
      blocks.push(el("pre", [code]));
      i = end === -1 ? lines.length : end + 1;
    } else if ((m = HEADING.exec(line))) {
      blocks.push(el(`h${Math.min(m[1].length + 2, 6)}`, inline(m[2])));
      i++;
    } else if (RULE.test(line)) {
      blocks.push(el("hr"));
      i++;
    } else if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        inner.push(m[1]);
        i++;
      }
      blocks.push(el("blockquote", parseBlocks(inner)));
    } else if (BULLET.test(line) || ORDERED.test(line)) {
      i = parseList(lines, i, blocks);
    } else {
      const para = [];
      while (i < lines.length && lines[i].trim() && !startsBlock(lines[i])) {
        para.push(lines[i].trim());
        i++;
      }
      blocks.push(el("p", inline(para.join("\n"))));
    }
  }
  return blocks;
}

function startsBlock(line) {
  return [FENCE, HEADING, BULLET, ORDERED, QUOTE, RULE].some((re) => re.test(line));
}

function parseList(lines, i, blocks) {
  const ordered = !BULLET.test(lines[i]);
  const pattern = ordered ? ORDERED : BULLET;
  const items = [];
  const first = ORDERED.exec(lines[i]);
  while (i < lines.length) {
    const line = lines[i];
    const m = pattern.exec(line);
    if (m) {
      items.push([m[2]]);
    } else if (line.trim() && /^\s{2,}/.test(line)) {
      items[items.length - 1].push(line.trim());
    } else if (!(!line.trim() && i + 1 < lines.length && pattern.test(lines[i + 1]))) {
      break; // A blank line keeps the list going only when another item follows.
    }
    i++;
  }
  const list = el(ordered ? "ol" : "ul", items.map((item) => el("li", inline(item.join("\n")))));
  if (ordered && first[1] !== "1") list.start = Number(first[1]);
  blocks.push(list);
  return i;
}

/** Inline spans of `text` as nodes: code, bold, italic, links; the rest as text. */
export function inline(text) {
  const nodes = [];
  let plain = "";
  const flush = () => {
    if (plain) nodes.push(document.createTextNode(plain));
    plain = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const span = c === "`" ? codeSpan(text, i)
      : c === "*" || c === "_" ? emphasis(text, i)
      : c === "[" ? link(text, i)
      : c === "\n" ? { node: el("br"), end: i + 1 }
      : c === "\\" && /[\\`*_[\]()#+\-.!>~]/.test(text[i + 1] || "") ? { text: text[i + 1], end: i + 2 }
      : null;
    if (!span) {
      plain += c;
      i++;
    } else if (span.text !== undefined) {
      plain += span.text;
      i = span.end;
    } else {
      flush();
      nodes.push(span.node);
      i = span.end;
    }
  }
  flush();
  return nodes;
}

function codeSpan(text, i) {
  const ticks = /^`+/.exec(text.slice(i))[0];
  const close = text.indexOf(ticks, i + ticks.length);
  if (close === -1) return { text: ticks, end: i + ticks.length };
  let body = text.slice(i + ticks.length, close);
  if (/^ .* $/.test(body)) body = body.slice(1, -1);
  return { node: el("code", [document.createTextNode(body)]), end: close + ticks.length };
}

function emphasis(text, i) {
  const marker = text.startsWith(text[i].repeat(2), i) ? text[i].repeat(2) : text[i];
  const start = i + marker.length;
  // Intraword underscores (snake_case) and a marker before a space are not emphasis.
  if (marker[0] === "_" && /\w/.test(text[i - 1] || "")) return null;
  if (!text[start] || /\s/.test(text[start])) return null;
  let close = text.indexOf(marker, start + 1);
  while (close !== -1 && (/\s/.test(text[close - 1]) || (marker.length === 1 && text[close + 1] === marker))) {
    close = text.indexOf(marker, close + (marker.length === 1 && text[close + 1] === marker ? 2 : 1));
  }
  if (close === -1) return null;
  const tag = marker.length === 2 ? "strong" : "em";
  return { node: el(tag, inline(text.slice(start, close))), end: close + marker.length };
}

function link(text, i) {
  const m = /^\[([^\]\n]+)\]\(\s*([^)\s]+)(?:\s+"[^"]*")?\s*\)/.exec(text.slice(i));
  if (!m) return null;
  if (!SAFE_URL.test(m[2])) return { text: m[1], end: i + m[0].length };
  const a = el("a", inline(m[1]));
  a.href = m[2];
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  return { node: a, end: i + m[0].length };
}
