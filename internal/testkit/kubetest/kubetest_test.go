package kubetest_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/kubetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait on the server; generous for a loaded machine.
const deadline = 2 * time.Minute

// client speaks to the API server as one user, over TLS verified with the
// CA of an Access and no keep-alives (nothing lingers after a test). It
// uses nothing of k8s.io, as the package promises its callers can.
type client struct {
	t      *testing.T
	access kubetest.Access
	http   *http.Client
}

func newClient(t *testing.T, a kubetest.Access) *client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(a.CAData) {
		t.Fatalf("Access.CAData holds no PEM certificate: %q", a.CAData)
	}
	return &client{t: t, access: a, http: &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		DisableKeepAlives: true,
	}}}
}

// do sends a request and returns the response; the caller closes its body.
func (c *client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.access.Host+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.access.BearerToken)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.http.Do(req)
}

// object is the part of a Kubernetes object or Status the tests read.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name            string `json:"name"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Data   map[string]string `json:"data,omitempty"`
	Code   int               `json:"code,omitempty"`
	Reason string            `json:"reason,omitempty"`
}

// call sends a request and decodes the answer; it returns an error naming
// the status unless the status is want.
func (c *client) call(ctx context.Context, method, path string, body any, want int) (object, error) {
	var o object
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return o, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return o, fmt.Errorf("%s %s: %s, want %d: %s", method, path, resp.Status, want, b)
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("%s %s: %v: %s", method, path, err, b)
	}
	return o, nil
}

func configMap(name, n string) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name},
		"data":       map[string]string{"n": n},
	}
}

const configMaps = "/api/v1/namespaces/default/configmaps"

// watchEvent is one line of a watch's JSON stream.
type watchEvent struct {
	Type   string `json:"type"`
	Object object `json:"object"`
}

// TestSmoke checks what the adapter's integration tests rely on, over
// plain HTTP with an Access: the server is reachable with the CA and the
// admin token, watches end on their own, a restarted server keeps its
// data, a watch from an older resource version after a restart gets 410
// Expired, and the server serves again once etcd was restarted.
func TestSmoke(t *testing.T) {
	env := kubetest.Start(t)
	ctx := t.Context()
	admin := newClient(t, env.Admin())
	if got := env.Admin().Host; got != env.Host() {
		t.Errorf("Admin().Host = %q, want Host() = %q", got, env.Host())
	}

	created, err := admin.call(ctx, http.MethodPost, configMaps, configMap("smoke", "0"), http.StatusCreated)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	update := configMap("smoke", "1")
	update["metadata"].(map[string]any)["resourceVersion"] = created.Metadata.ResourceVersion
	updated, err := admin.call(ctx, http.MethodPut, configMaps+"/smoke", update, http.StatusOK)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	t.Logf("created at resourceVersion %s, updated at %s", created.Metadata.ResourceVersion, updated.Metadata.ResourceVersion)

	t.Run("watch ends on its own", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		q := url.Values{"watch": {"1"}, "resourceVersion": {created.Metadata.ResourceVersion}, "allowWatchBookmarks": {"true"}}
		resp, err := admin.do(ctx, http.MethodGet, configMaps+"?"+q.Encode(), nil)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("watch: %s, want 200", resp.Status)
		}
		start := time.Now()
		// A write the watch does not see moves the cache past it, so that the
		// server has something to say in a bookmark before it ends the watch.
		if _, err := admin.call(ctx, http.MethodPost, "/api/v1/namespaces/kube-public/configmaps", configMap("elsewhere", "0"), http.StatusCreated); err != nil {
			t.Fatalf("create elsewhere: %v", err)
		}
		counts := map[string]int{}
		dec := json.NewDecoder(resp.Body)
		for {
			var ev watchEvent
			err := dec.Decode(&ev)
			if errors.Is(err, io.EOF) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("watch still open after %v; want the server to end it after %v to %v",
					deadline, kubetest.MinRequestTimeout, 2*kubetest.MinRequestTimeout)
			}
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			counts[ev.Type]++
		}
		if counts["MODIFIED"] != 1 {
			t.Errorf("watch from the create got %v, want one MODIFIED", counts)
		}
		t.Logf("server ended the watch after %v; events: %v", time.Since(start).Round(time.Millisecond), counts)
	})

	start := time.Now()
	env.RestartAPIServer(t)
	t.Logf("RestartAPIServer took %v", time.Since(start).Round(time.Millisecond))
	got, err := admin.call(ctx, http.MethodGet, configMaps+"/smoke", nil, http.StatusOK)
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if got.Data["n"] != "1" {
		t.Errorf("after restart smoke has data %v, want n=1", got.Data)
	}

	// The restarted server's watch cache starts at the list it made on start,
	// so a watch from before the restart is too old for it.
	code, reason := firstWatchError(ctx, t, admin, created.Metadata.ResourceVersion)
	if code != http.StatusGone || reason != "Expired" {
		t.Fatalf("watch from %s after restart = %d %s, want 410 Expired", created.Metadata.ResourceVersion, code, reason)
	}

	start = time.Now()
	env.RestartEtcd(t)
	t.Logf("RestartEtcd took %v", time.Since(start).Round(time.Millisecond))
	// The API server reconnects to etcd by itself; until then requests may fail.
	if err := poll(ctx, func() error {
		_, err := admin.call(ctx, http.MethodGet, configMaps+"/smoke", nil, http.StatusOK)
		return err
	}); err != nil {
		t.Fatalf("get after etcd restart: %v", err)
	}
}

// TestRBAC checks that under WithRBAC the admin's access may create and the
// plain user's is forbidden, list and watch alike.
func TestRBAC(t *testing.T) {
	env := kubetest.Start(t, kubetest.WithRBAC())
	ctx := t.Context()
	admin, user := newClient(t, env.Admin()), newClient(t, env.User())
	if env.Admin().BearerToken == env.User().BearerToken {
		t.Fatalf("Admin() and User() have the same token")
	}
	if _, err := admin.call(ctx, http.MethodPost, configMaps, configMap("rbac", "0"), http.StatusCreated); err != nil {
		t.Fatalf("admin create: %v", err)
	}
	for _, path := range []string{configMaps, configMaps + "?watch=1"} {
		if _, err := user.call(ctx, http.MethodGet, path, nil, http.StatusForbidden); err != nil {
			t.Errorf("user: %v", err)
		}
	}
}

// firstWatchError opens a watch from rv and returns the status code and
// reason it fails with, whether as the answer or as the watch's first event.
func firstWatchError(ctx context.Context, t *testing.T, c *client, rv string) (code int, reason string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	resp, err := c.do(ctx, http.MethodGet, configMaps+"?"+url.Values{"watch": {"1"}, "resourceVersion": {rv}}.Encode(), nil)
	if err != nil {
		t.Fatalf("watch from %s: %v", rv, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var st object
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatalf("watch from %s: %s: %v", rv, resp.Status, err)
		}
		t.Logf("the error came as the answer: %s", resp.Status)
		return st.Code, st.Reason
	}
	var ev watchEvent
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
		t.Fatalf("watch from %s: no first event: %v", rv, err)
	}
	if ev.Type != "ERROR" {
		t.Fatalf("watch from %s: first event %s, want ERROR", rv, ev.Type)
	}
	t.Logf("the error came as the watch's first event")
	return ev.Object.Code, ev.Object.Reason
}

// poll calls f until it returns nil or the deadline passes, and returns f's
// last error then.
func poll(ctx context.Context, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-tick.C:
		}
	}
}
