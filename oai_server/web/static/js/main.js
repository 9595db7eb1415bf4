// The chat page: wires the settings, the conversation list, the message list and the
// composer to the OpenAI client. State lives in `conversation` (saved to localStorage
// after each turn); the list shows it through the virtualized list.

import { ApiError, listModels, streamChat } from "./api.js";
import * as store from "./store.js";
import { VirtualList } from "./vlist.js";
import { estimateHeight, fillReply, renderRow, replyStats } from "./view.js";
import { askKey } from "./keydialog.js";
import { Attachments, apiMessage } from "./attach.js";

const $ = (id) => document.getElementById(id);
const scroller = $("messages");
const prompt = $("prompt");
const live = $("live");

let settings = store.loadSettings();
let takesImages = new Map(); // model id -> whether it takes images
const attachments = new Attachments({
  button: $("attach"),
  input: $("image-file"),
  tray: $("attachments"),
  prompt,
  onError: (text) => setStatus(text),
});
let conversation = null;
let streaming = null; // {index, controller, frame}
let stick = true; // follow the end of the list until the user scrolls up
let lastTop = 0;

// Figures the browser tests read (and anyone curious, from the console).
const stats = { updates: [] };
window.oaiChat = { stats };

const list = new VirtualList(scroller, {
  render: (i) => renderRow(conversation.messages[i]),
  estimate: (i) => estimateHeight(conversation.messages[i], scroller.clientWidth || 800),
});
list.onUpdate = () => {
  if (stick) list.scrollToEnd();
  $("jump").hidden = stick;
};

// --- settings -------------------------------------------------------------------

const FIELDS = {
  "base-url": "baseUrl",
  "api-key": "apiKey",
  "system-prompt": "system",
  temperature: "temperature",
  "max-tokens": "maxTokens",
};

function showSettings() {
  for (const [id, key] of Object.entries(FIELDS)) $(id).value = settings[key];
}

for (const [id, key] of Object.entries(FIELDS)) {
  $(id).addEventListener("change", () => {
    settings[key] = $(id).value;
    store.saveSettings(settings);
    if (key === "baseUrl" || key === "apiKey") loadModels();
  });
}

$("settings-form").addEventListener("submit", (event) => event.preventDefault());

$("model").addEventListener("change", () => {
  settings.model = $("model").value;
  attachments.enable(takesImages.get(settings.model));
  store.saveSettings(settings);
});

function setStatus(text) {
  $("status").textContent = text;
}

/** Runs `call`; on a 401 asks for an API key and runs it again with that key. */
async function withKey(call) {
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401)) throw err;
      const key = await askKey(err.message);
      if (key === null) throw err;
      settings.apiKey = key;
      store.saveSettings(settings);
      showSettings();
    }
  }
}

async function loadModels() {
  setStatus("Loading models…");
  try {
    const models = await withKey(() => listModels({ baseUrl: settings.baseUrl, apiKey: settings.apiKey }));
    takesImages = new Map(models.map((m) => [m.id, m.images]));
    const ids = models.map((m) => m.id);
    const select = $("model");
    select.replaceChildren(
      ...ids.map((id) => {
        const option = document.createElement("option");
        option.value = option.textContent = id;
        return option;
      })
    );
    if (ids.includes(settings.model)) select.value = settings.model;
    settings.model = select.value;
    attachments.enable(takesImages.get(settings.model));
    setStatus(ids.length ? "" : "The server lists no models.");
  } catch (err) {
    setStatus(`Could not list models: ${err.message}`);
  }
}

// --- conversations --------------------------------------------------------------

function showConversations() {
  const items = store.listConversations().map(({ id, title }) => {
    const li = document.createElement("li");
    const open = document.createElement("button");
    open.type = "button";
    open.className = "conv";
    open.textContent = title;
    open.dataset.id = id;
    if (conversation && id === conversation.id) open.setAttribute("aria-current", "true");
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "delete";
    remove.textContent = "×";
    remove.dataset.delete = id;
    remove.setAttribute("aria-label", `Delete conversation: ${title}`);
    li.append(open, remove);
    return li;
  });
  $("conversations").replaceChildren(...items);
}

function openConversation(next) {
  stop();
  conversation = next;
  for (const message of conversation.messages) {
    // A reply cut off by a reload or a closed tab.
    if (message.streaming) Object.assign(message, { streaming: false, stopped: true });
  }
  stick = true;
  list.reset(conversation.messages.length);
  list.scrollToEnd();
  showConversations();
}

$("conversations").addEventListener("click", (event) => {
  const target = event.target.closest("button");
  if (!target) return;
  if (target.dataset.id) {
    const found = store.loadConversation(target.dataset.id);
    if (found) openConversation(found);
    prompt.focus();
  } else if (target.dataset.delete) {
    store.deleteConversation(target.dataset.delete);
    if (conversation.id === target.dataset.delete) openConversation(store.newConversation());
    else showConversations();
  }
});

$("new-chat").addEventListener("click", () => {
  openConversation(store.newConversation());
  prompt.focus();
});

// --- sending and streaming ------------------------------------------------------

function setBusy(busy) {
  $("send").hidden = busy;
  $("stop").hidden = !busy;
}

function announce(text) {
  live.append(document.createTextNode(text));
}

function paint(index) {
  // Once per frame however many tokens came: only this row's content is rebuilt.
  streaming.frame = 0;
  const row = list.element(index);
  if (!row) return;
  const began = performance.now();
  fillReply(row, conversation.messages[index]);
  if (stick) list.scrollToEnd();
  stats.updates.push(performance.now() - began);
  if (stats.updates.length > 5000) stats.updates.shift();
}

async function generate(index) {
  const message = conversation.messages[index];
  const history = conversation.messages
    .slice(0, index)
    .filter((m) => (m.content || (m.images && m.images.length)) && (m.role === "user" || m.role === "assistant"))
    .map(apiMessage);
  if (settings.system.trim()) history.unshift({ role: "system", content: settings.system });
  const body = { model: settings.model, messages: history };
  if (settings.temperature !== "") body.temperature = Number(settings.temperature);
  if (settings.maxTokens !== "") body.max_tokens = Number(settings.maxTokens);

  const controller = new AbortController();
  streaming = { index, controller, frame: 0 };
  setBusy(true);
  live.replaceChildren();
  let started = performance.now();
  let first = null;
  let usage = null;
  try {
    await withKey(async () => {
      started = performance.now();
      const events = streamChat({ baseUrl: settings.baseUrl, apiKey: settings.apiKey, body, signal: controller.signal });
      for await (const event of events) {
        if (event.type === "usage") {
          usage = event.usage;
          continue;
        }
        if (first === null) first = performance.now();
        if (event.type === "reasoning") {
          message.reasoning = (message.reasoning || "") + event.text;
        } else {
          message.content += event.text;
          announce(event.text);
        }
        if (!streaming.frame) streaming.frame = requestAnimationFrame(() => paint(index));
      }
    });
  } catch (err) {
    if (err.name === "AbortError") message.stopped = true;
    else message.error = { message: err.message, status: err.status || null, type: err.type || null, code: err.code || null };
    if (message.error) announce(` Error: ${err.message}`);
  }
  if (streaming.frame) cancelAnimationFrame(streaming.frame);
  message.streaming = false;
  message.stats = replyStats(started, first, performance.now(), usage);
  streaming = null;
  setBusy(false);
  list.splice(index, conversation.messages.length);
  save();
}

function save() {
  if (!store.saveConversation(conversation)) setStatus("Browser storage is full: this chat is not saved.");
  showConversations();
}

function stop() {
  if (streaming) streaming.controller.abort();
}

function send() {
  const text = prompt.value.trim();
  if ((!text && !attachments.urls.length) || streaming) return;
  prompt.value = "";
  const from = conversation.messages.length;
  const images = attachments.take();
  conversation.messages.push(images.length ? { role: "user", content: text, images } : { role: "user", content: text });
  conversation.messages.push({ role: "assistant", content: "", streaming: true });
  save();
  stick = true;
  list.splice(from, conversation.messages.length);
  generate(conversation.messages.length - 1);
}

function regenerate(index) {
  if (streaming) return;
  conversation.messages.splice(index);
  conversation.messages.push({ role: "assistant", content: "", streaming: true });
  stick = true;
  list.splice(index, conversation.messages.length);
  generate(index);
}

async function copy(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No clipboard API outside secure contexts: the selection route still works.
    const area = document.createElement("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  button.textContent = "Copied";
  setTimeout(() => (button.textContent = "Copy"), 1500);
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
$("stop").addEventListener("click", stop);
prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && streaming && !$("key-dialog").open) stop();
});

scroller.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-action]");
  const row = event.target.closest("[data-index]");
  if (!button || !row) return;
  const index = Number(row.dataset.index);
  if (button.dataset.action === "copy") copy(conversation.messages[index].content, button);
  else if (button.dataset.action === "regenerate") regenerate(index);
});

// Auto-scroll follows the reply until the user scrolls up, and again once they are back at the end.
scroller.addEventListener("scroll", () => {
  const top = scroller.scrollTop;
  if (list.atEnd()) stick = true;
  else if (top < lastTop - 1) stick = false;
  lastTop = top;
  $("jump").hidden = stick;
}, { passive: true });
scroller.addEventListener("wheel", (event) => {
  if (event.deltaY < 0) stick = false;
}, { passive: true });
scroller.addEventListener("keydown", (event) => {
  if (["ArrowUp", "PageUp", "Home"].includes(event.key)) stick = false;
});
$("jump").addEventListener("click", () => {
  stick = true;
  list.scrollToEnd();
  prompt.focus();
});

// --- start ------------------------------------------------------------------------

showSettings();
const recent = store.listConversations()[0];
openConversation((recent && store.loadConversation(recent.id)) || store.newConversation());
loadModels();
prompt.focus();
