// Package harness runs the processes of a chaos scenario and injects their
// faults: it builds the holder and server commands once, starts them as
// real OS processes in process groups of their own, signals them (SIGKILL,
// SIGSTOP, SIGCONT), runs nats-server in its own process so that it can be
// killed and restarted on the same port with the same store, and puts a
// toxiproxy proxy (in this process) between each holder and the server.
//
// Everything it starts is stopped by t.Cleanup, even when the test fails,
// and every wait has a deadline.
package harness
