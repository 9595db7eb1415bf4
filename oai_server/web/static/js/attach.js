// Images attached to the next message: picked with the file input or pasted into the
// message box, shown as thumbnails above it until sent. Offered only for a model that
// takes images (its /v1/models entry lists "image" among its input modalities).

const MAX_BYTES = 20 * 1024 * 1024; // the server's default --media-max-bytes

export class Attachments {
  constructor({ button, input, tray, prompt, onError }) {
    this.button = button;
    this.input = input;
    this.tray = tray;
    this.onError = onError;
    this.urls = [];
    button.addEventListener("click", () => input.click());
    input.addEventListener("change", () => {
      for (const file of input.files) this.add(file);
      input.value = "";
    });
    prompt.addEventListener("paste", (event) => {
      if (this.button.hidden) return;
      const files = [...event.clipboardData.items]
        .filter((item) => item.kind === "file" && item.type.startsWith("image/"))
        .map((item) => item.getAsFile());
      if (files.length) event.preventDefault();
      for (const file of files) this.add(file);
    });
  }

  /** Offer attaching (or not) for the selected model; dropping what it cannot take. */
  enable(images) {
    this.button.hidden = !images;
    if (!images) this.take();
  }

  add(file) {
    if (!file.type.startsWith("image/")) return this.onError(`${file.name} is not an image.`);
    if (file.size > MAX_BYTES) return this.onError(`${file.name} is larger than 20 MiB.`);
    const reader = new FileReader();
    reader.onload = () => {
      this.urls.push(reader.result);
      this.show();
    };
    reader.readAsDataURL(file);
  }

  /** The attached images' data: URLs, emptying the tray. */
  take() {
    const urls = this.urls;
    this.urls = [];
    this.show();
    return urls;
  }

  show() {
    this.tray.hidden = !this.urls.length;
    this.tray.replaceChildren(
      ...this.urls.map((url, i) => {
        const item = document.createElement("span");
        const img = document.createElement("img");
        img.src = url;
        img.alt = `Attached image ${i + 1}`;
        const remove = document.createElement("button");
        remove.type = "button";
        remove.textContent = "×";
        remove.setAttribute("aria-label", `Remove image ${i + 1}`);
        remove.addEventListener("click", () => {
          this.urls.splice(i, 1);
          this.show();
        });
        item.append(img, remove);
        return item;
      })
    );
  }
}

/** A message as the API takes it: its images as `image_url` parts before its text. */
export function apiMessage({ role, content, images }) {
  if (!images || !images.length) return { role, content };
  return {
    role,
    content: [
      ...images.map((url) => ({ type: "image_url", image_url: { url } })),
      { type: "text", text: content },
    ],
  };
}
