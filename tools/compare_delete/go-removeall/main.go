// Command removeall removes each PATH with Go's os.RemoveAll, so that
// sweepfs rm can be compared with it (system calls per file, wall time):
//
//	go build -o /tmp/removeall . && strace -c -f /tmp/removeall DIR
//
// It prints the wall time of each removal to stderr and exits 1 if one
// failed.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: removeall PATH...")
		os.Exit(2)
	}
	status := 0
	for _, p := range os.Args[1:] {
		t0 := time.Now()
		err := os.RemoveAll(p)
		fmt.Fprintf(os.Stderr, "removeall %s: %.3f s\n", p, time.Since(t0).Seconds())
		if err != nil {
			fmt.Fprintln(os.Stderr, "removeall:", err)
			status = 1
		}
	}
	os.Exit(status)
}
