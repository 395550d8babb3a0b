package shred

import "errors"

// Sentinels of reading personal data.
var (
	// ErrForgotten: the data subject was forgotten; its values read as
	// erased.
	ErrForgotten = errors.New("shred: data subject forgotten")
	// ErrKeyMissing: a data key is not in the keys bucket and no tombstone
	// says it was forgotten — a lost or partly restored bucket. Never
	// shown as erased.
	ErrKeyMissing = errors.New("shred: data key missing (no tombstone: the keys bucket lost it)")
	// ErrNoBucket: personal data was read but the keys bucket is gone
	// (lost, or not restored): an error, never taken for erased.
	ErrNoBucket = errors.New("shred: no keys bucket")
	// ErrForgetting: a value of the data subject was to be sealed while a
	// forget erases its keys; try again once it is done (the value then
	// reads as erased where it came from the state before the forget).
	ErrForgetting = errors.New("shred: data subject being forgotten (a forget is erasing its keys, or stopped midway: esjet forget again finishes it); try again")
	// ErrNoSubject: data to be sealed has a personal field but no data
	// subject to key it by (its subject member empty or not a string):
	// the writer's input is wrong.
	ErrNoSubject = errors.New("shred: personal field without a data subject")
	// ErrCorrupt: a sealed value does not parse or does not authenticate.
	ErrCorrupt = errors.New("shred: sealed value corrupt")
	// ErrReserved: data to be written holds a sealed value, which only the
	// node writes; see [CheckReserved].
	ErrReserved = errors.New("shred: reserved member")
)
