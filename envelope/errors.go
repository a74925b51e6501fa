package envelope

import "errors"

// Errors returned by [Envelope.Open], [Envelope.Seal] and the parsing
// helpers. They are wrapped with the object's name (and, for
// [ErrNoIdentity], with age's [*age.NoIdentityMatchError]); test for them
// with [errors.Is].
var (
	// ErrNoIdentity means none of the configured identities can open the
	// object: it was sealed to other keys (a wrong or rotated-out key).
	// The error also wraps age's *age.NoIdentityMatchError.
	ErrNoIdentity = errors.New("no configured identity matches the object")

	// ErrTampered means the object is not what a holder of a configured
	// identity sealed: a byte was changed, or it was forged by someone who
	// knows only a public recipient.
	ErrTampered = errors.New("object tampered or forged")

	// ErrUnauthenticated means the object decrypts with a configured
	// identity but carries no authentication stanza for any configured
	// identity: it was forged with a public recipient, or sealed by a writer
	// whose identity this envelope does not hold (for example when opening
	// with a recovery-only key). Errors wrapping ErrUnauthenticated also
	// wrap [ErrTampered]. [AllowUnauthenticated] opts in to reading such
	// objects in an emergency.
	ErrUnauthenticated = errors.New("object not authenticated by any configured identity")

	// ErrNotEnvelope means the bytes are not a sealed envelope (wrong magic)
	// or use a format version or feature this package does not know.
	ErrNotEnvelope = errors.New("not a cairn-state envelope")

	// ErrTruncated means the object is shorter than its header says it is.
	ErrTruncated = errors.New("object truncated")

	// ErrNameMismatch means the object is authentic but was sealed for
	// another name: it was copied or moved.
	ErrNameMismatch = errors.New("object sealed for another name")

	// ErrTooLarge means an object or plaintext exceeds [MaxSize].
	ErrTooLarge = errors.New("object too large")

	// ErrInvalidName means a name is empty or longer than [MaxNameLen].
	ErrInvalidName = errors.New("invalid object name")

	// ErrInvalidIdentity means an identity file or key could not be parsed,
	// or an identity cannot be used by an envelope.
	ErrInvalidIdentity = errors.New("invalid identity")

	// ErrInvalidRecipient means a recipient string could not be parsed.
	ErrInvalidRecipient = errors.New("invalid recipient")
)
