// One message as a row of the list: who spoke, the text (markdown for replies, plain
// text for the user), above a reply its thinking (collapsed), and under a reply its
// figures, its error and its actions.
// Every piece of text goes in as text; markdown goes through the safe renderer.

import { renderMarkdown } from "./markdown.js";

const ROLE_NAMES = { user: "You", assistant: "Assistant", system: "System" };

function node(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

/** A row element for `message`. */
export function renderRow(message) {
  const row = node("article", `msg ${message.role}`);
  row.setAttribute("aria-label", ROLE_NAMES[message.role] || message.role);
  row.append(node("div", "role", ROLE_NAMES[message.role] || message.role));
  const content = node("div", "content");
  if (message.role === "assistant") {
    const thinking = thinkingBlock();
    row.append(thinking);
    fillThinking(thinking, message);
  }
  row.append(content);
  fillContent(content, message);
  if (message.role === "assistant") row.append(footer(message));
  return row;
}

/** Re-renders what streams in a reply row: its thinking and its text. The thinking's
 * block is kept, not rebuilt, so a reader who opened it keeps it open. */
export function fillReply(row, message) {
  const thinking = row.querySelector(".thinking");
  if (thinking) fillThinking(thinking, message);
  fillContent(row.querySelector(".content"), message);
}

// The model's thinking (`delta.reasoning`), apart from its answer: collapsed, as plain text.
function thinkingBlock() {
  const details = node("details", "thinking");
  details.append(node("summary", "", "Thinking"), node("div", "thought"));
  return details;
}

function fillThinking(details, message) {
  details.hidden = !message.reasoning;
  details.querySelector(".thought").textContent = message.reasoning || "";
}

/** Re-renders the text of a row (a reply streaming): only this row's content changes. */
export function fillContent(content, message) {
  if (message.role !== "assistant") {
    content.classList.add("plain");
    content.textContent = message.content;
    if (message.images && message.images.length) {
      const images = node("div", "images");
      message.images.forEach((url, i) => {
        const img = document.createElement("img");
        img.src = url; // a data: URL the user attached (the page's CSP allows no other)
        img.alt = `Image ${i + 1}`;
        images.append(img);
      });
      content.prepend(images);
    }
  } else if (message.streaming && !message.content) {
    const typing = node("span", "typing");
    typing.setAttribute("role", "img");
    typing.setAttribute("aria-label", "Assistant is typing");
    typing.append(node("i"), node("i"), node("i"));
    content.replaceChildren(typing);
  } else {
    content.replaceChildren(renderMarkdown(message.content));
  }
}

function footer(message) {
  const foot = node("div", "foot");
  if (message.error) {
    const e = message.error;
    const label = [e.status ? `Error ${e.status}` : "Error", e.code || e.type].filter(Boolean);
    const box = node("div", "error");
    box.append(node("strong", "", label.join(" · ") + ": "), document.createTextNode(e.message));
    foot.append(box);
  }
  if (message.stopped) foot.append(node("div", "note", "Stopped."));
  if (message.stats) foot.append(stats(message.stats));
  if (!message.streaming) {
    const actions = node("div", "actions");
    const copy = node("button", "", "Copy");
    copy.type = "button";
    copy.dataset.action = "copy";
    const again = node("button", "", "Regenerate");
    again.type = "button";
    again.dataset.action = "regenerate";
    actions.append(copy, again);
    foot.append(actions);
  }
  return foot;
}

function ms(value) {
  return value < 1000 ? `${Math.round(value)} ms` : `${(value / 1000).toFixed(2)} s`;
}

function stats(s) {
  const line = node("div", "stats");
  const items = [];
  if (s.ttft !== null) items.push(["ttft", "time to first token", `TTFT ${ms(s.ttft)}`]);
  items.push(["total", "end-to-end time", `total ${ms(s.total)}`]);
  if (s.tokens !== null) items.push(["tokens", "completion tokens", `${s.tokens} tokens`]);
  if (s.tps !== null) {
    items.push(["tps", "tokens per second from the first token to the last", `${s.tps.toFixed(1)} tok/s`]);
  }
  for (const [key, title, text] of items) {
    const item = node("span", key, text);
    item.title = title;
    line.append(item);
  }
  return line;
}

/** The figures of a reply from its timestamps (ms) and the usage chunk. */
export function replyStats(started, first, ended, usage) {
  const tokens = usage ? usage.completion_tokens : null;
  const decode = first === null ? 0 : ended - first;
  return {
    ttft: first === null ? null : first - started,
    total: ended - started,
    tokens,
    // The decode rate, over a window long enough to mean something (a reply that
    // arrived in one read has none).
    tps: tokens !== null && tokens > 1 && decode >= 10 ? ((tokens - 1) * 1000) / decode : null,
  };
}

/** A height guess for a row not yet measured: lines of text at the list's width. */
export function estimateHeight(message, width) {
  const perLine = Math.max(20, Math.floor((width - 48) / 8));
  let lines = 0;
  for (const para of message.content.split("\n")) lines += Math.max(1, Math.ceil(para.length / perLine));
  return 44 + lines * 22 + (message.role === "assistant" ? 34 : 0);
}
