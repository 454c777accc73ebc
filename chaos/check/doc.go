// Package check judges what the chaos suite recorded.
//
// # Invariants
//
// Check builds one tenure per acquisition (lease, token) from the holders'
// store operations, each with the validity interval its holder claimed on
// the reference clock: from the return of the acquire to the earlier of its
// last claimed ValidUntil and its release call (a killed holder's claim runs
// on: a write it sent before dying may still land). It then
// reports as violations:
//
//   - two tenures of one lease whose intervals overlap (unless an operator
//     tampered with the key in between, which no lease can survive: then only
//     the fence protects, and it is checked below; or one owner took its own
//     key again after its earlier term's workload had stopped);
//   - tokens that do not strictly increase in the order of acquisition, or a
//     token handed to two tenures;
//   - a write the fenced resource accepted with a token lower than one it had
//     accepted before, from no known tenure, or outside its tenure's
//     interval;
//   - a workload that started outside its tenure or outlived its validity
//     while its process was not paused.
//
// # Linearizability
//
// Model is a porcupine model of one lease key, and Linearizable checks the
// history of store operations (acquire, renew, release, and operator
// tampering) against it: each answer must be explainable by one order of
// the operations within their call and return times, where a held key may
// expire from TTL after the call of its last write on.
//
// # Latency
//
// Check also pairs consecutive tenures into handovers, names their cause
// (a release, a kill, a pause, a network fault...) and measures the time
// from the cause to the new owner's workload start. Percentile summarises.
package check
