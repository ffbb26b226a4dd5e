package telemetry

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
)

// The option setters every package that records metrics and spans
// shares: its WithMeterProvider, WithTracerProvider and WithKeyAttribute
// keep their own doc comments and hand these the place where their
// config keeps its Options.

// WithMeterProvider returns an option that sets the MeterProvider of the
// Options at returns; nil is refused as sqllock.ErrInvalidOption.
func WithMeterProvider[C any](mp metric.MeterProvider, at func(*C) *Options) func(*C) error {
	return func(c *C) error {
		if err := at(c).SetMeterProvider(mp); err != nil {
			return fmt.Errorf("%w: %w", sqllock.ErrInvalidOption, err)
		}
		return nil
	}
}

// WithTracerProvider returns an option that sets the TracerProvider of
// the Options at returns; nil is refused as sqllock.ErrInvalidOption.
func WithTracerProvider[C any](tp trace.TracerProvider, at func(*C) *Options) func(*C) error {
	return func(c *C) error {
		if err := at(c).SetTracerProvider(tp); err != nil {
			return fmt.Errorf("%w: %w", sqllock.ErrInvalidOption, err)
		}
		return nil
	}
}

// WithKeyAttribute returns an option that sets KeyAttribute of the
// Options at returns.
func WithKeyAttribute[C any](on bool, at func(*C) *Options) func(*C) error {
	return func(c *C) error {
		at(c).KeyAttribute = on
		return nil
	}
}
