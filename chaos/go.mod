module github.com/asterforge/aster/chaos

go 1.26.0

replace github.com/asterforge/aster => ../

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/asterforge/aster v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
