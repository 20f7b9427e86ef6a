// The resultlog hooks: beforeAll leases the run and loads its durable cases (a changed config
// is refused before any call), afterEach makes each finished case durable, afterAll lets go.
export { afterAll, afterEach, beforeAll } from "../../dist/src/promptfoo/index.js";
