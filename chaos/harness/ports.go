package harness

import "net"

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ps, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// FreePorts asks the kernel for n distinct free loopback ports, for
// processes the caller starts later (each must bind its own on 127.0.0.1).
// They are free when it returns; nothing keeps them so.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		// Each stays bound until all are picked, so that they differ.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
