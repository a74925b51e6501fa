package envelope_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"filippo.io/age"

	"github.com/cairnhq/state/envelope"
)

func Example() {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		panic(err)
	}
	env, err := envelope.New([]age.Identity{id}, nil)
	if err != nil {
		panic(err)
	}

	sealed, err := env.Seal("tokens/github", []byte("ghp_example"))
	if err != nil {
		panic(err)
	}
	plaintext, err := env.Open("tokens/github", sealed)
	fmt.Println(string(plaintext), err)

	// The same bytes stored under another name do not open.
	_, err = env.Open("tokens/gitlab", sealed)
	fmt.Println(errors.Is(err, envelope.ErrNameMismatch))

	// Nor does an object sealed by someone who only knows the recipient.
	other, err := envelope.New([]age.Identity{mustX25519()}, []age.Recipient{id.Recipient()})
	if err != nil {
		panic(err)
	}
	forged, err := other.Seal("tokens/github", []byte("evil"))
	if err != nil {
		panic(err)
	}
	_, err = env.Open("tokens/github", forged)
	fmt.Println(errors.Is(err, envelope.ErrTampered), errors.Is(err, envelope.ErrUnauthenticated))
	// Output:
	// ghp_example <nil>
	// true
	// true true
}

func mustX25519() *age.X25519Identity {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		panic(err)
	}
	return id
}

func ExampleParseIdentities() {
	// The format age-keygen writes: comments, then one key per line.
	file := `# created: 2026-01-01T00:00:00Z
# public key: age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj
AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX
`
	ids, err := envelope.ParseIdentities(strings.NewReader(file))
	if err != nil {
		panic(err)
	}
	r, err := envelope.RecipientOf(ids[0])
	if err != nil {
		panic(err)
	}
	fmt.Println(len(ids), r)
	// Output:
	// 1 age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj
}

// A recovery key is sealed to but never writes: it can read every object,
// in an emergency, only with the explicit opt-in.
func ExampleAllowUnauthenticated() {
	writer, recovery := mustX25519(), mustX25519()
	env, err := envelope.New([]age.Identity{writer}, []age.Recipient{recovery.Recipient()})
	if err != nil {
		panic(err)
	}
	sealed, err := env.Seal("db/main", []byte("rows"))
	if err != nil {
		panic(err)
	}

	strict, err := envelope.New([]age.Identity{recovery}, nil)
	if err != nil {
		panic(err)
	}
	_, err = strict.Open("db/main", sealed)
	fmt.Println(errors.Is(err, envelope.ErrUnauthenticated))

	emergency, err := envelope.New([]age.Identity{recovery}, nil,
		envelope.AllowUnauthenticated(), envelope.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	plaintext, err := emergency.Open("db/main", sealed)
	fmt.Println(string(plaintext), err)
	// Output:
	// true
	// rows <nil>
}

func ExampleNewPassphraseIdentity() {
	// Work factor 10 keeps the example fast; use 0 (age's default, 18) or
	// more in production.
	pass, err := envelope.NewPassphraseIdentity("a long and unguessable passphrase", 10)
	if err != nil {
		panic(err)
	}
	env, err := envelope.New([]age.Identity{pass}, nil)
	if err != nil {
		panic(err)
	}
	sealed, err := env.Seal("config", []byte("v=1"))
	if err != nil {
		panic(err)
	}
	plaintext, err := env.Open("config", sealed)
	fmt.Println(string(plaintext), err)
	// Output:
	// v=1 <nil>
}
