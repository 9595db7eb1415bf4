// The API-key prompt shown when the server answers 401: a modal <dialog> (keyboard
// and screen-reader friendly by default). Callers waiting at the same time share it.

let pending = null;

document.getElementById("key-cancel").addEventListener("click", () => {
  document.getElementById("key-dialog").close("cancel");
});

/** Resolves to the key the user typed, or null when they cancelled. */
export function askKey(reason) {
  if (pending) return pending;
  const dialog = document.getElementById("key-dialog");
  const input = document.getElementById("key-input");
  document.getElementById("key-reason").textContent = reason;
  input.value = "";
  dialog.returnValue = ""; // Escape closes with the value of the last close
  pending = new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        pending = null;
        resolve(dialog.returnValue === "ok" && input.value ? input.value : null);
      },
      { once: true }
    );
  });
  dialog.showModal();
  input.focus();
  return pending;
}
