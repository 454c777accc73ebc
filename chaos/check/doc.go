// Package check judges what the chaos suite recorded.
//
// # Invariants
//
// Check builds one tenure per acquisition (lease, term, token) from the
// holders' store operations, each with the validity interval its holder
// claimed on the reference clock: from the return of the acquire to the
// earlier of its last claimed ValidUntil and its release call (a killed
// holder's claim runs on: a write it sent before dying may still land).
// Tenures are told apart by their term (lease.Claim.Term), never by their
// owner ID: two processes configured with one owner ID are two holders. A
// lease held under a session (lock.Config.Session: record.Op.Session) has
// no validity of its own: it is valid while its session is, so its claim
// runs to the session's last claimed validity (the session's renewals
// extend it) and ends at the earlier of its own release call and the
// session's. It then reports as violations:
//
//   - two tenures of one lease whose intervals overlap (unless one term took
//     its own key again after its workload had stopped), whatever an
//     operator did to the key: a store must make contenders that saw a key
//     vanish wait for the longest TTL a holder could have;
//   - tokens that do not strictly increase in the order of acquisition, or a
//     token handed to two tenures, within one epoch of the store (a server
//     that lost acknowledged writes starts a new one: record.Op.Epoch);
//   - a write the fenced resource accepted against the fence's rule (a token
//     lower than one it had accepted, or equal to it from another term),
//     from no known tenure, or outside its tenure's interval;
//   - a workload that started outside its tenure or outlived its validity
//     while its process was not paused and it was not built to ignore its
//     cancellation;
//   - a candidate (one LeaseSupervisor or Locker) that started a workload
//     while one of its earlier workloads still ran.
//
// Requests checks what callers of a singleton saw against what its leaders
// applied through the fence: every request answered or failed at its
// deadline, every answered request applied, applied once by the resource
// (which records the ID with the effect), and a de-duplicated handler never
// sending a request to the resource again once its first application was
// recorded.
//
// # Linearizability
//
// Model is a porcupine model of one lease key, and Linearizable checks the
// history of store operations (acquire, renew, release, and operator
// tampering) against it: each answer must be explainable by one order of
// the operations within their call and return times, where a held key may
// expire from TTL after the call of its last write on. A key acquired under
// a session is checked together with the session's key (the session's own
// acquire, renewals and release are operations on it): it has no TTL of
// its own, is held while the session's term holds the session's key, and
// is free to contenders once the session is released or may have expired.
//
// # Latency
//
// Check also pairs consecutive tenures into handovers, names their cause
// (a release, a kill, a pause, a network fault...) and measures the time
// from the cause to the new owner's workload start. Percentile summarises.
package check
