// The Instagram view: for each agent that posts on Instagram, its posting plan and next runs
// (GET /jobs/schedules), the drafts awaiting approval (instagram.post jobs) with their images
// as they will be uploaded (GET /jobs/{id}/preview/{n}: converted by the Instagram adapter),
// the caption editable, approve / reject; the publish history (instagram.publish jobs) with
// permalinks and errors; and the account's publishing quota (GET /agents/{id}/quotas:
// Instagram's own count where the publisher is graph, else the posts Carrier recorded). Text is
// set as text.

import { ApiError, call, token } from "./api.js";
import { stateBadge, visibleAgents, when } from "./jobs.js";

const POST = "instagram.post";
const INBOUND = "instagram.inbound";
const PUBLISH = "instagram.publish";
const CAPTION_MAX = 2200;
const HISTORY = 20; // publish jobs shown

function instagramConfig(agent) {
  return agent.character?.clientConfig?.instagram || {};
}

function posts(agent) {
  return (agent.character?.clients || []).includes("instagram");
}

/** An image of a draft (``what``: "preview", converted as it will be uploaded, or "media", the
 * file as it is) as a data: URL, with what the conversion did and the size it has (the page's
 * CSP allows images from itself and data: only, and an <img> cannot send the bearer token). */
async function imageData(jobId, index, what = "preview") {
  const headers = { "X-Carrier-Client": "console" };
  if (token.get()) headers.Authorization = `Bearer ${token.get()}`;
  const response = await fetch(`/jobs/${encodeURIComponent(jobId)}/${what}/${index}`, { headers });
  if (!response.ok) {
    let body = {};
    try {
      body = await response.json();
    } catch {
      body = { message: `${response.status} ${response.statusText}` };
    }
    throw new ApiError(response.status, body);
  }
  const blob = await response.blob();
  const src = await new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
  let changes = [];
  try {
    changes = JSON.parse(response.headers.get("X-Carrier-Media-Changes") || "[]");
  } catch {
    changes = [];
  }
  return { src, changes, size: (response.headers.get("X-Carrier-Media-Size") || "").replace("x", "×") };
}

/** The account's quota in words: the line, and what else to know (or ""). */
function quotaWords(quota) {
  const hours = Math.round(quota.window_s / 3600);
  const window = hours === 24 ? "24 h" : `${hours} h`;
  const used = quota.limit == null ? `${quota.used}` : `${quota.used} of ${quota.limit}`;
  const whose = quota.source === "platform" ? "Instagram's count" : "counted by Carrier";
  const line = `${used} ${quota.what} in the last ${window} (${whose})`;
  const more = [];
  if (quota.note) more.push(`${quota.note}.`);
  if (quota.source === "platform" && quota.carrier_limit != null) {
    more.push(`Carrier published ${quota.carrier_used} of its own limit of ${quota.carrier_limit} (clientConfig.instagram.dailyLimit).`);
  }
  const full = (quota.limit != null && quota.used >= quota.limit) || (quota.carrier_limit != null && quota.carrier_used >= quota.carrier_limit);
  if (full) {
    const free = quota.next_free_at ? `the next slot frees ${when(quota.next_free_at)}` : "posts wait until a slot frees";
    more.push(`Full: ${free}; drafts approved meanwhile are published then.`);
  }
  return { line, more: more.join(" ") };
}

/** What the plan says, in a line. */
function planLine(config) {
  const plan = config.plan || {};
  const parts = [];
  const schedule = plan.schedule;
  if (!schedule) parts.push("no schedule: uploads only");
  const approval = plan.approval ?? config.requireApproval ?? config.require_approval;
  const required = approval === true || (typeof approval === "string" && ["required", "yes", "true", "on"].includes(approval.toLowerCase()));
  parts.push(required ? "approval required" : "no approval");
  if (plan.media?.library) parts.push(`media from ${plan.media.library} (${plan.media.order || "sequential"})`);
  if (plan.dryRun ?? config.dryRun ?? config.dry_run) parts.push("dry run: nothing is published");
  return parts.join(" · ");
}

export function mount(root, ctx) {
  const { el } = ctx;
  const notice = el("p", { className: "notice", role: "status", id: "ig-notice" });
  const list = el("div", { className: "ig-agents", id: "ig-agents" }, el("p", { className: "empty", textContent: "Loading…" }));
  const refreshButton = el("button", { type: "button", textContent: "Refresh" });
  root.append(
    el(
      "section",
      { className: "panel" },
      el("div", { className: "panel-head" }, el("h2", { textContent: "Instagram" }), refreshButton),
      notice,
      list,
    ),
  );
  const say = (text, tone = "") => {
    notice.className = `notice ${tone}`;
    notice.textContent = text;
  };

  function preview(job, draft) {
    const frames = el("div", { className: "ig-frames" });
    draft.media.forEach((path, index) => {
      const name = path.split(/[\\/]/).pop();
      const frame = el("figure", { className: "ig-frame" });
      const caption = el("figcaption", { textContent: name });
      frame.append(el("div", { className: "ig-placeholder", textContent: "loading…" }), caption);
      frames.append(frame);
      if (/\.(mp4|mov|m4v)$/i.test(name)) {
        frame.firstChild.textContent = `video (${draft.kind}): uploaded as it is, not previewed here`;
        return;
      }
      const show = ({ src, changes, size }, alt, words) => {
        const img = el("img", { src, alt });
        // Its own shape (the frame's default is square); the page's CSP allows CSSOM styles.
        img.addEventListener("load", () => {
          img.style.aspectRatio = `${img.naturalWidth} / ${img.naturalHeight}`;
          img.style.objectFit = "contain";
        });
        frame.firstChild.replaceWith(img);
        caption.textContent = words(size, changes);
      };
      imageData(job.id, index)
        .then((got) =>
          show(got, `${name} as it will be uploaded`, (size, changes) =>
            `${name} · as uploaded, ${size} · ${changes.length ? changes.join("; ") : "unchanged"}`,
          ),
        )
        .catch(async (error) => {
          if (error instanceof ApiError && error.code === "no_preview") {
            // No adapter converts these: the file as it is, and why.
            try {
              const got = await imageData(job.id, index, "media");
              show(got, name, () => `${name} · the file as it is (${error.message})`);
              return;
            } catch (again) {
              error = again;
            }
          }
          frame.firstChild.replaceWith(el("p", { className: "ig-placeholder error", textContent: ctx.describe(error) }));
        });
    });
    return frames;
  }

  function draftCard(agent, job, config) {
    const draft = job.payload.draft;
    const card = el("article", { className: "ig-draft", id: `draft-${job.id}` });
    const fieldId = `caption-${job.id}`;
    const caption = el("textarea", { id: fieldId, rows: 4, maxLength: CAPTION_MAX, value: draft.caption || "" });
    const counter = el("span", { className: "subtle ig-count" });
    const count = () => {
      counter.textContent = `${caption.value.length} / ${CAPTION_MAX}`;
    };
    caption.addEventListener("input", count);
    count();
    const approve = el("button", { type: "button", className: "primary", textContent: "Approve" });
    const reject = el("button", { type: "button", className: "danger", textContent: "Reject" });
    const status = el("p", { className: "notice", role: "status" });
    const decide = async (verb) => {
      approve.disabled = reject.disabled = true;
      const body = {};
      if (verb === "approve" && caption.value !== (draft.caption || "")) body.caption = caption.value;
      if (verb === "reject") body.reason = "rejected in the console";
      try {
        await call("POST", `/jobs/${encodeURIComponent(job.id)}/${verb}`, { body });
        say(
          verb === "approve"
            ? `Approved ${agent.name}'s draft${body.caption !== undefined ? " with the edited caption" : ""}: it is being published.`
            : `Rejected ${agent.name}'s draft: it will not be posted.`,
          "ok",
        );
        await refresh();
      } catch (error) {
        status.className = "notice error";
        status.textContent = `Could not ${verb}: ${ctx.describe(error)}`;
        approve.disabled = reject.disabled = false;
      }
    };
    approve.addEventListener("click", () => decide("approve"));
    reject.addEventListener("click", () => decide("reject"));
    const meta = [`${draft.kind}`, `caption by ${draft.caption_by || "model"}`];
    if (draft.similarity != null) meta.push(`similarity to recent posts ${Number(draft.similarity).toFixed(2)}`);
    if (job.approval_expires_at) meta.push(`expires ${when(job.approval_expires_at)}`);
    if (draft.dry_run) meta.push("dry run");
    card.append(
      preview(job, draft),
      el(
        "div",
        { className: "ig-draft-body" },
        el("label", { htmlFor: fieldId, textContent: "Caption" }),
        caption,
        counter,
        el("p", { className: "meta", textContent: meta.join(" · ") }),
        status,
        el("div", { className: "actions" }, approve, reject),
      ),
    );
    return card;
  }

  // A reply to a comment or a DM held for a human (clientConfig.instagram.conversations
  // .approval): what it answers, the reply (editable), approve / reject.
  function replyCard(agent, job) {
    const answers = job.payload.answers || {};
    const card = el("article", { className: "ig-draft ig-reply", id: `reply-${job.id}` });
    const fieldId = `reply-text-${job.id}`;
    const reply = el("textarea", { id: fieldId, rows: 3, value: job.payload.reply || "" });
    const approve = el("button", { type: "button", className: "primary", textContent: "Approve" });
    const reject = el("button", { type: "button", className: "danger", textContent: "Reject" });
    const status = el("p", { className: "notice", role: "status" });
    const decide = async (verb) => {
      approve.disabled = reject.disabled = true;
      const edited = verb === "approve" && reply.value.trim() !== (job.payload.reply || "").trim();
      const body = edited ? { payload: { ...job.payload, reply: reply.value.trim() } } : {};
      if (verb === "reject") body.reason = "rejected in the console";
      try {
        await call("POST", `/jobs/${encodeURIComponent(job.id)}/${verb}`, { body });
        say(
          verb === "approve"
            ? `Approved ${agent.name}'s reply${edited ? " with your edit" : ""}: it is being sent.`
            : `Rejected ${agent.name}'s reply: it will not be sent.`,
          "ok",
        );
        await refresh();
      } catch (error) {
        status.className = "notice error";
        status.textContent = `Could not ${verb}: ${ctx.describe(error)}`;
        approve.disabled = reject.disabled = false;
      }
    };
    approve.addEventListener("click", () => decide("approve"));
    reject.addEventListener("click", () => decide("reject"));
    const meta = [`${answers.kind || "message"} from ${answers.from || "someone"}`];
    if (job.approval_expires_at) meta.push(`expires ${when(job.approval_expires_at)}`);
    card.append(
      el(
        "div",
        { className: "ig-draft-body" },
        el("p", { className: "meta", textContent: meta.join(" · ") }),
        el("blockquote", { className: "ig-answers", textContent: answers.text || "" }),
        el("label", { htmlFor: fieldId, textContent: "Reply" }),
        reply,
        status,
        el("div", { className: "actions" }, approve, reject),
      ),
    );
    return card;
  }

  function historyRow(job) {
    const draft = job.payload.draft || {};
    const result = job.result || {};
    const link = result.permalink
      ? el("a", { href: result.permalink, textContent: "permalink", rel: "noopener noreferrer", target: "_blank" })
      : el("span", { className: "subtle", textContent: result.dry_run ? "dry run" : "—" });
    const cell = (label, ...children) => {
      const td = el("td", {}, ...children);
      td.dataset.label = label;
      return td;
    };
    const tr = el(
      "tr",
      { id: `published-${job.id}` },
      cell("When", el("time", { dateTime: job.updated_at, title: job.updated_at, textContent: when(job.updated_at) })),
      cell("State", stateBadge(el, job.state)),
      el("td", { className: "ig-caption", textContent: draft.caption || "" }),
      cell("Post", link),
      cell("Error", el("span", { className: "job-error", textContent: job.last_error || "—" })),
    );
    tr.dataset.state = job.state;
    return tr;
  }

  async function agentPanel(agent) {
    const id = encodeURIComponent(agent.id);
    const [schedules, drafts, published, replies] = await Promise.all([
      call("GET", `/jobs/schedules?agent_id=${id}&kind=${POST}`),
      call("GET", `/jobs?agent_id=${id}&kind=${POST}&state=awaiting_approval`),
      call("GET", `/jobs?agent_id=${id}&kind=${PUBLISH}&limit=${HISTORY}`),
      call("GET", `/jobs?agent_id=${id}&kind=${INBOUND}&state=awaiting_approval`),
    ]);
    const config = instagramConfig(agent);
    // The quota may take Instagram a moment: filled in when it comes, the rest shown at once.
    const quotaLine = el("span", { className: "ig-quota", textContent: "reading the quota…" });
    const quotaNote = el("p", { className: "meta ig-quota-note", hidden: true });
    call("GET", `/agents/${id}/quotas`)
      .then((quotas) => {
        const quota = quotas.find((q) => q.client === "instagram");
        const words = quota ? quotaWords(quota) : { line: "no quota", more: "" };
        quotaLine.textContent = words.line;
        quotaNote.textContent = words.more;
        quotaNote.hidden = !words.more;
      })
      .catch((error) => {
        quotaLine.textContent = "quota unknown";
        quotaNote.textContent = `The quota could not be read: ${ctx.describe(error)}`;
        quotaNote.hidden = false;
      });
    const runs = schedules.length
      ? schedules.map((s) => {
          const next = s.finished ? "done" : s.next_at ? `next ${when(s.next_at)}` : "not queued yet";
          const later = s.upcoming.length ? `; then ${s.upcoming.map(when).join(", ")}` : "";
          return el("li", {}, `${s.describe}: ${next}${later}`);
        })
      : [el("li", { className: "subtle", textContent: "No scheduled runs (uploads through POST /{agent_id}/media are posted when due)." })];
    const section = el("section", { className: "ig-agent", id: `ig-${agent.id}` });
    section.setAttribute("aria-label", agent.name);
    const table = el(
      "table",
      { className: "jobs-table ig-history" },
      el("thead", {}, el("tr", {}, ...["When", "State", "Caption", "Post", "Error"].map((t) => el("th", { scope: "col", textContent: t })))),
      el("tbody", {}, ...published.map(historyRow)),
    );
    section.append(
      el(
        "div",
        { className: "panel-head" },
        el("div", { className: "title" }, el("h3", { textContent: agent.name }), el("span", { className: "agent-id", textContent: agent.id })),
        quotaLine,
      ),
      quotaNote,
      el("p", { className: "meta ig-plan", textContent: planLine(config) }),
      el("ul", { className: "schedule-list ig-runs" }, ...runs),
      el("h4", { textContent: `Drafts awaiting approval (${drafts.length})` }),
      drafts.length
        ? el("div", { className: "ig-drafts" }, ...drafts.map((job) => draftCard(agent, job, config)))
        : el("p", { className: "empty", textContent: "No draft waits for approval." }),
      el("h4", { textContent: `Replies awaiting approval (${replies.length})` }),
      replies.length
        ? el("div", { className: "ig-drafts" }, ...replies.map((job) => replyCard(agent, job)))
        : el("p", { className: "empty", textContent: "No reply waits for approval." }),
      el("h4", { textContent: "Published" }),
      published.length
        ? el("div", { className: "table-scroll" }, table)
        : el("p", { className: "empty", textContent: "Nothing published yet." }),
    );
    return section;
  }

  async function refresh() {
    let agents;
    try {
      agents = (await visibleAgents(ctx)).filter(posts);
    } catch (error) {
      say(`The agents could not be read: ${ctx.describe(error)}`, "error");
      return;
    }
    if (!agents.length) {
      list.replaceChildren(el("p", { className: "empty", textContent: "No agent this token sees posts on Instagram: add instagram to a persona's clients (Home, editor)." }));
      return;
    }
    const panels = await Promise.all(
      agents.map((agent) =>
        agentPanel(agent).catch((error) =>
          el("p", { className: "empty error", textContent: `${agent.name}: ${ctx.describe(error)}` }),
        ),
      ),
    );
    list.replaceChildren(...panels);
  }

  refreshButton.addEventListener("click", () => {
    say("");
    refresh();
  });

  return { show: refresh };
}
