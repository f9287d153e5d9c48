package storetest

import (
	"context"
	"errors"
	"os"

	"openbot/core"
)

// RerunEnv is the environment variable that makes RerunFromEnv wrap stores
// (any non-empty value): OPENBOT_TEST_RERUN=1 go test ./core/ ./agents/...
const RerunEnv = "OPENBOT_TEST_RERUN"

// Rerun wraps s so that every Update and Batch runs fn twice: first in a
// transaction that is rolled back, then again for real, as a store that
// retries a transaction after a serialization failure or a deadlock does; and
// every View runs fn twice, in two read transactions, as a store that runs a
// read again after losing its connection does. A callback that is safe to run
// more than once (it resets what it captures at its start and has no effect
// outside the transaction) behaves the same on the wrapper as on s. When the
// first run fails, its error is returned and fn does not run again. between,
// when not nil, is called after a write's first run and before its second, on
// the caller's goroutine: it stands for the transaction whose commit made the
// store run fn again, which the second run sees.
func Rerun(s core.Store, between func()) core.Store { return rerunStore{s, between} }

// RerunFromEnv is Rerun(s) when RerunEnv is set, s otherwise: the switch that
// runs a package's engine tests on callbacks that run twice.
func RerunFromEnv(s core.Store) core.Store {
	if os.Getenv(RerunEnv) == "" {
		return s
	}
	return Rerun(s, nil)
}

type rerunStore struct {
	core.Store
	between func()
}

// errDiscard rolls the first run back.
var errDiscard = errors.New("storetest: first run discarded")

// discarded runs fn in a transaction that is rolled back; it returns nil when
// fn succeeded (so fn is to run again), fn's error otherwise.
func (s rerunStore) discarded(ctx context.Context, fn func(core.Tx) error) error {
	err := s.Store.Update(ctx, func(tx core.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errDiscard
	})
	if !errors.Is(err, errDiscard) {
		return err
	}
	if s.between != nil {
		s.between()
	}
	return nil
}

func (s rerunStore) Update(ctx context.Context, fn func(core.Tx) error) error {
	if err := s.discarded(ctx, fn); err != nil {
		return err
	}
	return s.Store.Update(ctx, fn)
}

func (s rerunStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	if err := s.discarded(ctx, fn); err != nil {
		return err
	}
	return s.Store.Batch(ctx, fn)
}

func (s rerunStore) View(ctx context.Context, fn func(core.ReadTx) error) error {
	if err := s.Store.View(ctx, fn); err != nil {
		return err
	}
	return s.Store.View(ctx, fn)
}
