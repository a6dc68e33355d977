// Attachments in the console (docs/attachments.md): the attach button, drag and drop and paste
// of an image into the message box; each file is declared, uploaded where the API says (its own
// PUT locally, S3's presigned POST on AWS) and checked; the tray shows thumbnails and the
// refusals in words. Sent with the next message; the transcript shows thumbnails.

import { describe, errorOf, path } from "./api.js";
import { h, replaceChildren } from "./dom.js";

async function sha256Hex(buffer) {
  const digest = await crypto.subtle.digest("SHA-256", buffer);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function sizeText(size) {
  if (size >= 1024 * 1024) return `${(size / (1024 * 1024)).toFixed(1)} MB`;
  if (size >= 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${size} bytes`;
}

/** A chip: thumbnail (images) or the type, then name, type and size. */
function chip(name, mediaType, size, thumbUrl, extra = []) {
  const preview = thumbUrl
    ? h("img", { class: "thumb", src: thumbUrl, alt: `thumbnail of ${name}` })
    : h("span", { class: "thumb doc", "aria-hidden": "true" }, mediaType.split("/")[1] || "file");
  return h(
    "li",
    { class: "attachment", dataset: { name } },
    preview,
    h("span", { class: "att-name" }, name),
    h("span", { class: "muted" }, ` ${mediaType}, ${sizeText(size)}`),
    ...extra,
  );
}

/** The transcript's attachment references as chips; image thumbnails are fetched with auth. */
export function attachmentList(parts, ctx) {
  const refs = (parts || []).filter((p) => p && p.kind === "attachment");
  if (!refs.length) return null;
  const list = h("ul", { class: "attachments", "aria-label": "attachments" });
  for (const ref of refs) {
    const removed = ref.removed === true;
    const item = chip(ref.name, ref.media_type, ref.size || 0, null, [
      removed ? h("span", { class: "att-removed" }, " (removed)") : null,
    ]);
    list.append(item);
    if (!removed && String(ref.media_type).startsWith("image/")) {
      thumbnail(ctx, ref.attachment_id).then((url) => {
        if (!url) return;
        const img = h("img", { class: "thumb", src: url, alt: `thumbnail of ${ref.name}` });
        item.firstChild.replaceWith(img);
      });
    }
  }
  return list;
}

async function thumbnail(ctx, attachmentId) {
  try {
    const route = path("sessions", ctx.sessionId, "attachments", attachmentId, "content");
    const response = await ctx.api.send("GET", route);
    if (!response.ok) return null;
    return URL.createObjectURL(await response.blob());
  } catch {
    return null;
  }
}

export class AttachmentTray {
  /** `nodes`: {button, input, list, error, drop (where files may be dropped), paste}. */
  constructor(nodes, ctx) {
    this.nodes = nodes;
    this.ctx = ctx; // {api, sessionId()}
    this.ready = []; // {id, name}
    this.uploading = 0;
    nodes.button.addEventListener("click", () => nodes.input.click());
    nodes.input.addEventListener("change", () => {
      this.addFiles([...nodes.input.files]);
      nodes.input.value = "";
    });
    nodes.drop.addEventListener("dragover", (event) => {
      event.preventDefault();
      nodes.drop.classList.add("dragging");
    });
    nodes.drop.addEventListener("dragleave", () => nodes.drop.classList.remove("dragging"));
    nodes.drop.addEventListener("drop", (event) => {
      event.preventDefault();
      nodes.drop.classList.remove("dragging");
      this.addFiles([...(event.dataTransfer?.files || [])]);
    });
    nodes.paste.addEventListener("paste", (event) => {
      const files = [...(event.clipboardData?.items || [])]
        .filter((item) => item.kind === "file")
        .map((item) => item.getAsFile())
        .filter(Boolean);
      if (files.length) {
        event.preventDefault();
        this.addFiles(files);
      }
    });
  }

  get busy() {
    return this.uploading > 0;
  }

  /** The ids to send with the message; the tray empties once the message is accepted. */
  ids() {
    return this.ready.map((a) => a.id);
  }

  clear() {
    this.ready = [];
    replaceChildren(this.nodes.list);
    this.showError("");
  }

  showError(text) {
    this.nodes.error.textContent = text;
    this.nodes.error.hidden = !text;
  }

  addFiles(files) {
    for (const file of files) this.upload(file);
  }

  async upload(file) {
    const sessionId = this.ctx.sessionId();
    if (!sessionId) return;
    const name = file.name || `pasted.${(file.type.split("/")[1] || "png").replace("jpeg", "jpg")}`;
    const mediaType = file.type || "application/octet-stream";
    this.uploading += 1;
    this.showError("");
    try {
      const buffer = await file.arrayBuffer();
      const base = path("sessions", sessionId, "attachments");
      const created = await this.ctx.api.post(base, {
        name,
        media_type: mediaType,
        size: buffer.byteLength,
        sha256: await sha256Hex(buffer),
      });
      const record = await this.sendBytes(created, buffer, base, name, mediaType);
      if (record.status !== "ready") throw new Error(record.error || `${name} is ${record.status}`);
      this.ready.push({ id: record.id, name });
      const thumb = mediaType.startsWith("image/") ? URL.createObjectURL(file) : null;
      this.nodes.list.append(chip(name, record.media_type, record.size, thumb));
    } catch (error) {
      this.showError(`${name} was not attached: ${describe(error)}`);
    } finally {
      this.uploading -= 1;
    }
  }

  async sendBytes(created, buffer, base, name, mediaType) {
    const { attachment, upload } = created;
    if (upload.method === "PUT") {
      const response = await this.ctx.api.fetchImpl(this.ctx.api.baseUrl + upload.url, {
        method: "PUT",
        headers: this.ctx.api.headers(upload.headers || {}),
        body: buffer,
      });
      if (!response.ok) throw await errorOf(response);
      return response.json();
    }
    // S3's presigned POST: the form's fields, then the file; never the API's token.
    const form = new FormData();
    for (const [key, value] of Object.entries(upload.fields || {})) form.append(key, value);
    form.append("file", new Blob([buffer], { type: mediaType }), name);
    const response = await this.ctx.api.fetchImpl(upload.url, { method: "POST", body: form });
    if (!response.ok) throw new Error(`the store refused the upload (${response.status})`);
    return this.ctx.api.get(`${base}/${attachment.id}`);
  }
}
