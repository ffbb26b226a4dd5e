package telemetry

import (
	"errors"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sqllock/sqllock"
)

// The shared option setters set the Options a package's config keeps and
// refuse a nil provider as an invalid option, as every package's own did.
func TestSharedOptions(t *testing.T) {
	type config struct{ tel Options }
	at := func(c *config) *Options { return &c.tel }
	var c config
	for _, o := range []func(*config) error{
		WithMeterProvider(noop.NewMeterProvider(), at),
		WithTracerProvider(tnoop.NewTracerProvider(), at),
		WithKeyAttribute(true, at),
	} {
		if err := o(&c); err != nil {
			t.Fatal(err)
		}
	}
	if c.tel.MeterProvider == nil || c.tel.TracerProvider == nil || !c.tel.KeyAttribute {
		t.Errorf("options not set: %+v", c.tel)
	}
	for name, o := range map[string]func(*config) error{
		"meter":  WithMeterProvider(nil, at),
		"tracer": WithTracerProvider(nil, at),
	} {
		if err := o(&c); !errors.Is(err, sqllock.ErrInvalidOption) || !errors.Is(err, ErrNilProvider) {
			t.Errorf("nil %s provider: %v, want ErrInvalidOption and ErrNilProvider", name, err)
		}
	}
}
