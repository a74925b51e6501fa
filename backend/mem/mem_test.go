package mem_test

import (
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/backendtest"
	"github.com/cairnhq/state/backend/mem"
)

func TestConformance_ConditionalWrites(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		NewBackend: func(*testing.T) backend.Backend { return mem.New(mem.Options{}) },
	})
}

func TestConformance_NoConditionalWrites(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		NewBackend:                 func(*testing.T) backend.Backend { return mem.New(mem.Options{NoConditionalWrites: true}) },
		CopyRefusesIfSourceVersion: true,
		CopyRefusesIfAbsent:        true,
	})
}
