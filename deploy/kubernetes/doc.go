// Package kubernetes holds the Kubernetes manifests of the sample service
// (examples/service) and of a three-node NATS JetStream cluster, the
// Prometheus alert rules, and the test that checks them against the
// Kubernetes API types and against what the service serves. It is a
// module of its own, so that the Kubernetes packages the test needs are no
// dependency of Aster's.
//
//	kubectl apply -k deploy/kubernetes
//
// docs/operations.md, "Running on Kubernetes", explains them.
package kubernetes
