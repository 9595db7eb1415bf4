// Conversations and settings kept in the browser's localStorage, so they survive a
// reload. One key per conversation (a long one is rewritten alone) and one index of
// {id, title, updated} for the sidebar.

const PREFIX = "oai-chat:";
const INDEX = `${PREFIX}index`;
const SETTINGS = `${PREFIX}settings`;

function read(key, fallback) {
  try {
    const raw = localStorage.getItem(key);
    return raw === null ? fallback : JSON.parse(raw);
  } catch {
    return fallback;
  }
}

function write(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
    return true;
  } catch {
    return false; // Storage full or disabled: the chat goes on, unsaved.
  }
}

export const DEFAULT_SETTINGS = {
  baseUrl: `${location.origin}/v1`,
  apiKey: "",
  model: "",
  system: "",
  temperature: "", // empty: not sent, so the model's own default (its generation config) applies
  maxTokens: 512,
};

export function loadSettings() {
  return { ...DEFAULT_SETTINGS, ...read(SETTINGS, {}) };
}

export function saveSettings(settings) {
  write(SETTINGS, settings);
}

/** [{id, title, updated}], newest first. */
export function listConversations() {
  return read(INDEX, []).sort((a, b) => b.updated - a.updated);
}

export function loadConversation(id) {
  return read(PREFIX + "conv:" + id, null);
}

export function newConversation() {
  const id = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  return { id, title: "New chat", created: Date.now(), updated: Date.now(), messages: [] };
}

/** Saves `conversation` (messages: [{role, content, stats?, error?}]); false when storage refused. */
export function saveConversation(conversation) {
  conversation.updated = Date.now();
  const first = conversation.messages.find((m) => m.role === "user");
  if (first && conversation.title === "New chat") conversation.title = first.content.slice(0, 60);
  if (!write(PREFIX + "conv:" + conversation.id, conversation)) return false;
  const index = read(INDEX, []).filter((c) => c.id !== conversation.id);
  index.push({ id: conversation.id, title: conversation.title, updated: conversation.updated });
  return write(INDEX, index);
}

export function deleteConversation(id) {
  localStorage.removeItem(PREFIX + "conv:" + id);
  write(INDEX, read(INDEX, []).filter((c) => c.id !== id));
}
