// Package supervision runs declarative supervision trees of protoactor-go
// actors and goroutines, with what Erlang/OTP supervisors offer and what
// protoactor-go lacks.
package supervision
