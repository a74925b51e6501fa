package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Example runs a short operator session in-process on a local directory:
// create an identity and a store, write an object under the lock, read it
// back, look at the lock, remove the object.
func Example() {
	dir, err := os.MkdirTemp("", "cairn-state-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	env := map[string]string{
		"CAIRN_STATE_URL":      "file://" + filepath.Join(dir, "state"),
		"CAIRN_STATE_IDENTITY": filepath.Join(dir, "identity.txt"),
	}
	cli := func(stdin string, out io.Writer, args ...string) int {
		return run(context.Background(), args, stdio{in: strings.NewReader(stdin), out: out, err: io.Discard},
			func(k string) string { return env[k] })
	}

	cli("", io.Discard, "keygen")                 // writes CAIRN_STATE_IDENTITY's file; prints a random recipient
	cli("", io.Discard, "init")                   // prints the new store's random id
	cli("hello\n", io.Discard, "put", "greeting") // prints a random version
	cli("", os.Stdout, "get", "greeting")
	cli("", os.Stdout, "lock", "status")
	cli("", io.Discard, "rm", "greeting") // prints the version history kept, to restore it
	code := cli("", os.Stdout, "get", "greeting")
	fmt.Println("exit", code)
	// Output:
	// hello
	// lock: not held
	// exit 1
}
