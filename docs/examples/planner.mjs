// A minimal cloud planner for a2a-edge, in plain Node.js (18+, no packages): the three
// endpoints of docs/contract.md §3, enough to pass a turn, a memory sync and a workflow event.
// Start from it; replace `plan()` with your own planning. Run:
//   node docs/examples/planner.mjs --port 18081
// and set the runtime's `cloud.base_url` to http://127.0.0.1:18081.
// Every request is printed on stdout as one JSON line {"path", "body"} (the user's words
// included: this is a development planner, not one to run with real users' logs).
import http from "node:http";
import { randomUUID } from "node:crypto";

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const PORT = Number(arg("port", "18081"));
const TOKEN = arg("token", ""); // when set, every request must carry `authorization: Bearer …`
const KINDS = new Set([
  "short_term_pair", "profile_candidate", "profile_confirmed", "memory_deletion",
  "task_terminal", "consent",
]);

// Per robot: the sync position we hand out (contract §3.2: `version` is v<N>, never backwards;
// `cursor` is ours, the robot only returns it) and the write ids already taken (a robot sends
// a write again after a crash between send and ack: ack it again, apply it once).
const robots = new Map();
const robot = (id) => {
  if (!robots.has(id)) robots.set(id, { n: 0, taken: new Set(), workflows: 0 });
  return robots.get(id);
};
const position = (r) => ({ cursor: `cur-${r.n}`, version: `v${r.n}` });

// The planning: a rule or two. The planner makes each `workflow_id` (unique per robot).
function plan(r, text) {
  if (text.includes("청정")) {
    const room = ["안방", "거실", "주방", "현관"].find((x) => text.includes(x)) ?? "거실";
    const workflowId = `wf-${Date.now().toString(36)}-${++r.workflows}`;
    return {
      route: "ODL",
      reply: `${room}에 가서 청정을 시작할게요.`,
      workflows: [{
        workflow_id: workflowId,
        plan_id: "room_clean",
        steps: [
          { step_id: "step_move", capability_id: "mobility", operation_id: "move_to_room",
            args: { room }, depends_on: [] },
          { step_id: "step_purify", capability_id: "air_purifier", operation_id: "start",
            args: { mode: "auto" }, depends_on: ["step_move"] },
        ],
      }],
    };
  }
  return { route: "DEF", reply: "네, 말씀 잘 들었어요.", workflows: [] };
}

function turn(body) {
  const r = robot(body.device_id);
  const p = plan(r, body.recognized_text ?? "");
  const workflowId = p.workflows[0]?.workflow_id ?? "";
  r.n += 1; // this answer changes what we know of the robot
  return [200, {
    request_id: body.request_id, // echoed: required
    route_family: p.route,
    assistant_text: p.reply,
    device_task_requests: [],
    device_workflow_requests: p.workflows,
    memory_update: {
      contract_version: "a2a-memory-context-v1",
      source: "cloud_a2a_runtime",
      sync: position(r),
      write_candidates: {
        short_term_pair: { user_text: body.recognized_text, assistant_text: "",
                           route_family: p.route, workflow_id: workflowId },
        profile_candidates: [],
      },
      device_cache_update: { active_workflow_id: workflowId, last_route: p.route,
                             session_summary: "" },
    },
  }];
}

function memorySync(body) {
  const r = robot(body.device_id);
  const acked = [];
  const rejected = [];
  for (const w of body.writes ?? []) {
    if (!KINDS.has(w.kind)) {
      rejected.push({ write_id: w.write_id, reason: `unknown kind ${w.kind}` });
      continue;
    }
    if (!r.taken.has(w.write_id)) {
      r.taken.add(w.write_id); // apply it here: store the pair, the tombstone, …
      r.n += 1;
    }
    acked.push(w.write_id);
  }
  return [200, { sync: position(r), acked, rejected, updates: {} }];
}

function workflowEvent(body) {
  // Terminal events may come several in one request (contract.md §3.3, the batch form): take
  // each entry (its own request_id tells a repeat) and say how many. A planner that answers a
  // batch otherwise gets single events from that robot until it restarts.
  if (Array.isArray(body.batch)) return [200, { accepted: body.batch.length }];
  // A decision event asks what to do: null = no decision (the robot fails the workflow, or
  // waits for the user, and reports). A terminal event needs only a 200.
  return [200, body.decision_requested ? { decision: null } : {}];
}

const ROUTES = {
  "/v1/a2a/turn": turn,
  "/v1/a2a/memory/sync": memorySync,
  "/v1/a2a/workflow/events": workflowEvent,
};

const server = http.createServer((req, res) => {
  const answer = (status, body) => {
    res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
    res.end(JSON.stringify(body));
  };
  const route = ROUTES[req.url];
  if (req.method !== "POST" || !route) return answer(404, { error: "not_found" });
  if (TOKEN && req.headers.authorization !== `Bearer ${TOKEN}`) {
    return answer(401, { error: "unauthorized" });
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf-8"));
    } catch {
      return answer(400, { error: "invalid_json" });
    }
    console.log(JSON.stringify({ path: req.url, body }));
    try {
      answer(...route(body));
    } catch (err) {
      answer(500, { error: "internal_error", detail: String(err), id: randomUUID() });
    }
  });
});
server.listen(PORT, "127.0.0.1", () => console.error(`planner on http://127.0.0.1:${PORT}`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
process.on("SIGINT", () => server.close(() => process.exit(0)));
