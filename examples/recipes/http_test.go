package recipes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// putFenced writes body to url with a lease's token (inside sqllock.Do,
// sqllock.TokenFrom(ctx)) in a Fencing-Token header, for a service that
// keeps the largest token per object and answers 409 Conflict to an older
// one. The service's check and its write are one step on its side, which
// no check on the holder's side can be.
func putFenced(ctx context.Context, client *http.Client, url string, token int64, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Fencing-Token", strconv.FormatInt(token, 10))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("put %s: %w: token %d refused: %s", url, sqllock.ErrStaleToken, token, bytes.TrimSpace(msg))
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("put %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// putIfMatch writes body to url for a store that checks no tokens but has
// conditional writes (If-Match on the ETag, or a version precondition): the
// token is kept with the object, in its metadata, and the write is
// conditional on the version whose token was checked. A write that came
// in between changes the version, the store answers 412 Precondition
// Failed, and the check is made again on what is there now.
func putIfMatch(ctx context.Context, client *http.Client, url string, token int64, body []byte) error {
	for {
		etag, last, err := headToken(ctx, client, url)
		if err != nil {
			return err
		}
		if token < last {
			return fmt.Errorf("put %s: %w: token %d is older than %d, already applied", url, sqllock.ErrStaleToken, token, last)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Meta-Fencing-Token", strconv.FormatInt(token, 10))
		if etag == "" {
			req.Header.Set("If-None-Match", "*") // only if still absent
		} else {
			req.Header.Set("If-Match", etag)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusPreconditionFailed:
			continue // written meanwhile: check its token
		case resp.StatusCode/100 != 2:
			return fmt.Errorf("put %s: %s", url, resp.Status)
		}
		return nil
	}
}

// headToken returns the object's ETag and the token kept with it: "" and
// 0 when there is no object yet.
func headToken(ctx context.Context, client *http.Client, url string) (etag string, token int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound:
		return "", 0, nil
	case http.StatusOK:
	default:
		return "", 0, fmt.Errorf("head %s: %s", url, resp.Status)
	}
	if s := resp.Header.Get("Meta-Fencing-Token"); s != "" {
		if token, err = strconv.ParseInt(s, 10, 64); err != nil {
			return "", 0, fmt.Errorf("head %s: Meta-Fencing-Token %q: %w", url, s, err)
		}
	}
	return resp.Header.Get("ETag"), token, nil
}

// objectStore is the resource: objects by path, each with a version
// (its ETag), its metadata token, and the largest Fencing-Token written.
// A PUT with a Fencing-Token older than the object's is refused with 409;
// a PUT whose If-Match or If-None-Match does not hold, with 412. Each
// PUT's checks and write are one step, under mu.
type objectStore struct {
	mu      sync.Mutex
	objects map[string]*object
}

type object struct {
	body    []byte
	version int
	fenced  int64  // the largest Fencing-Token written
	meta    string // Meta-Fencing-Token, kept as given
}

func (o *object) etag() string { return fmt.Sprintf(`"v%d"`, o.version) }

func (s *objectStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[r.URL.Path]
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if o == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", o.etag())
		w.Header().Set("Meta-Fencing-Token", o.meta)
		w.Write(o.body)
	case http.MethodPut:
		if o == nil {
			o = &object{}
		}
		if h := r.Header.Get("Fencing-Token"); h != "" {
			token, err := strconv.ParseInt(h, 10, 64)
			if err != nil || token <= 0 {
				http.Error(w, fmt.Sprintf("Fencing-Token %q is not a token", h), http.StatusBadRequest)
				return
			}
			if token < o.fenced {
				http.Error(w, fmt.Sprintf("%s: token %d is older than %d, already applied", r.URL.Path, token, o.fenced), http.StatusConflict)
				return
			}
			o.fenced = token
		}
		if m := r.Header.Get("If-Match"); m != "" && (o.version == 0 || m != o.etag()) {
			http.Error(w, "version changed", http.StatusPreconditionFailed)
			return
		}
		if r.Header.Get("If-None-Match") == "*" && o.version != 0 {
			http.Error(w, "exists", http.StatusPreconditionFailed)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.body, o.meta = body, r.Header.Get("Meta-Fencing-Token")
		o.version++
		if s.objects == nil {
			s.objects = map[string]*object{}
		}
		s.objects[r.URL.Path] = o
		w.Header().Set("ETag", o.etag())
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// beforeFirstPut runs hook once, before the first PUT it carries leaves
// (another holder's write landing between a check and the write), and
// keeps the status of each PUT.
type beforeFirstPut struct {
	once     sync.Once
	hook     func()
	mu       sync.Mutex
	statuses []int
}

func (b *beforeFirstPut) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPut {
		return http.DefaultTransport.RoundTrip(r)
	}
	b.once.Do(b.hook)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		b.mu.Lock()
		b.statuses = append(b.statuses, resp.StatusCode)
		b.mu.Unlock()
	}
	return resp, err
}

// TestHTTPFencing: holder A writes an object, loses its key (a force
// release stands in for an expiry during a pause), B takes it with a
// larger token and writes; then A, not told yet, writes once more. Both
// recipes refuse A's late write with ErrStaleToken and the object keeps
// B's body: the service by the Fencing-Token header (409), the plain
// store by the token kept in the object's metadata and a conditional
// write. In "raced", B's write lands between A's check and A's PUT (B's
// token already checked), and the conditional write still refuses A
// (412, re-read, stale).
func TestHTTPFencing(t *testing.T) {
	recipes := []struct {
		name  string
		put   func(context.Context, *http.Client, string, int64, []byte) error
		raced bool
	}{
		{"Fencing-Token", putFenced, false},
		{"If-Match", putIfMatch, false},
		{"If-Match raced", putIfMatch, true},
	}
	for _, d := range testdb.Dialects {
		for _, rc := range recipes {
			t.Run(d.String()+"/"+rc.name, func(t *testing.T) {
				db := testdb.Open(t, d)
				ctx := ctxT(t)
				srv := httptest.NewServer(&objectStore{})
				defer srv.Close()
				url := srv.URL + "/reports/daily.csv"
				locker, err := tablelock.New(db.DB, d)
				if err != nil {
					t.Fatal(err)
				}
				defer locker.Close()
				key := "recipes/http/" + t.Name()

				a, err := locker.Acquire(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if err := rc.put(ctx, srv.Client(), url, a.Token(), []byte("A 1")); err != nil {
					t.Fatalf("A's first write: %v", err)
				}
				if ok, err := locker.ForceRelease(ctx, key, a.Token()); err != nil || !ok {
					t.Fatalf("force release of A: %v, %v", ok, err)
				}
				defer a.Release(ctx) // reports the loss
				bWrites := func() {
					err := sqllock.Do(ctx, locker, key, func(ctx context.Context) error {
						token, _ := sqllock.TokenFrom(ctx)
						return rc.put(ctx, srv.Client(), url, token, []byte("B 1"))
					})
					if err != nil {
						t.Errorf("B: %v", err)
					}
				}
				client, race := srv.Client(), &beforeFirstPut{hook: bWrites}
				if rc.raced {
					client = &http.Client{Transport: race}
				} else {
					bWrites()
				}

				// A, not told yet, writes with the token it was given.
				err = rc.put(ctx, client, url, a.Token(), []byte("A 2"))
				if !errors.Is(err, sqllock.ErrStaleToken) {
					t.Errorf("A's late write: %v, want ErrStaleToken", err)
				} else if !strings.Contains(err.Error(), strconv.FormatInt(a.Token(), 10)) {
					t.Errorf("A's refusal %q does not name A's token %d", err, a.Token())
				}
				if rc.raced && fmt.Sprint(race.statuses) != "[412]" {
					t.Errorf("A's PUTs were answered %v, want one 412: B's write did not come between A's check and its write", race.statuses)
				}
				t.Logf("A's late write (token %d): %v", a.Token(), err)
				resp, err := srv.Client().Get(url)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != "B 1" {
					t.Errorf("object holds %q, want B's write", body)
				}
			})
		}
	}
}
