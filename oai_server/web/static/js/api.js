// The OpenAI wire protocol, as any client speaks it: GET /models and a streamed
// POST /chat/completions. Errors come back as ApiError, from the error envelope
// ({"error": {"message", "type", "param", "code"}}) whether it arrived as an HTTP
// error body or as an event inside a stream that had already started.

import { readEvents } from "./sse.js";

export class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.type = error.type || null;
    this.code = error.code || null;
    this.param = error.param || null;
  }
}

function headers(apiKey) {
  const h = { "Content-Type": "application/json" };
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  return h;
}

async function failure(response) {
  let error = { message: `HTTP ${response.status} ${response.statusText}`.trim() };
  try {
    const body = await response.json();
    if (body && typeof body.error === "object" && body.error) error = body.error;
    else if (body && typeof body.error === "string") error = { message: body.error };
  } catch {
    // Not JSON: keep the status line.
  }
  return new ApiError(response.status, error);
}

function url(baseUrl, path) {
  return baseUrl.replace(/\/+$/, "") + path;
}

/** The ids of the models the server offers. */
export async function listModels({ baseUrl, apiKey, signal }) {
  const response = await fetch(url(baseUrl, "/models"), { headers: headers(apiKey), signal });
  if (!response.ok) throw await failure(response);
  const body = await response.json();
  // Each model's id, and whether it takes images (oai-server's `input_modalities`).
  return (body.data || []).map((m) => ({ id: m.id, images: (m.input_modalities || []).includes("image") }));
}

/**
 * Streams a chat completion. Yields {type: "delta", text} for each piece of content,
 * {type: "reasoning", text} for each piece of the model's thinking (`delta.reasoning`,
 * a model served with a reasoning parser) and {type: "usage", usage} for the final
 * usage chunk; throws ApiError on an error
 * response or an error event, and the fetch's AbortError when `signal` aborts.
 */
export async function* streamChat({ baseUrl, apiKey, body, signal }) {
  const response = await fetch(url(baseUrl, "/chat/completions"), {
    method: "POST",
    headers: headers(apiKey),
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  if (!response.ok) throw await failure(response);
  for await (const data of readEvents(response)) {
    if (data === "[DONE]") return;
    const chunk = JSON.parse(data);
    if (chunk.error) throw new ApiError(null, chunk.error);
    const delta = chunk.choices?.[0]?.delta;
    if (delta?.reasoning) yield { type: "reasoning", text: delta.reasoning };
    if (delta?.content) yield { type: "delta", text: delta.content };
    if (chunk.usage) yield { type: "usage", usage: chunk.usage };
  }
}
