package testenv_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/resumable-go/resumable/adapters/k8s/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait on the server; generous for a loaded machine.
const deadline = 2 * time.Minute

// TestSmoke checks what the adapter's integration tests rely on: a client-go
// clientset works against the server, watches end on their own, a restarted
// server keeps its data, and a watch from an older resource version after a
// restart gets 410 Expired.
func TestSmoke(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatalf("NewForConfig() = %v", err)
	}
	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault)

	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
		Data:       map[string]string{"n": "0"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create() = %v", err)
	}
	created.Data["n"] = "1"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("Update() = %v", err)
	}
	t.Logf("created at resourceVersion %s, updated at %s", created.ResourceVersion, updated.ResourceVersion)

	t.Run("watch ends on its own", func(t *testing.T) {
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			t.Fatalf("Watch() = %v", err)
		}
		defer w.Stop()
		start := time.Now()
		// A write the watch does not see moves the cache past it, so that the
		// server has something to say in a bookmark before it ends the watch.
		if _, err := cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Create() elsewhere = %v", err)
		}
		counts := map[watch.EventType]int{}
		timeout := time.After(deadline)
		for open := true; open; {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					open = false
					break
				}
				counts[ev.Type]++
			case <-timeout:
				t.Fatalf("watch still open after %v; want the server to end it after %v to %v",
					deadline, testenv.MinRequestTimeout, 2*testenv.MinRequestTimeout)
			}
		}
		if counts[watch.Modified] != 1 {
			t.Errorf("watch from the create got %v, want one MODIFIED", counts)
		}
		t.Logf("server ended the watch after %v; events: %v", time.Since(start).Round(time.Millisecond), counts)
	})

	start := time.Now()
	env.RestartAPIServer(t)
	t.Logf("RestartAPIServer took %v", time.Since(start).Round(time.Millisecond))

	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("List() after restart = %v", err)
	}
	if !containsConfigMap(list.Items, "smoke", "1") {
		t.Errorf("List() after restart has no ConfigMap smoke with n=1: %v", list.Items)
	}
	t.Logf("list after restart at resourceVersion %s", list.ResourceVersion)

	// The restarted server's watch cache starts at the list it made on start,
	// so a watch from before the restart is too old for it.
	err = firstWatchError(ctx, t, cms.Watch, created.ResourceVersion)
	if !apierrors.IsResourceExpired(err) || apierrors.ReasonForError(err) != metav1.StatusReasonExpired {
		t.Fatalf("watch from %s after restart = %v, want 410 Expired", created.ResourceVersion, err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != http.StatusGone {
		t.Errorf("watch after restart: code = %d, want %d", status.Status().Code, http.StatusGone)
	}
	t.Logf("watch from %s after restart: %v", created.ResourceVersion, err)

	start = time.Now()
	env.RestartEtcd(t)
	t.Logf("RestartEtcd took %v", time.Since(start).Round(time.Millisecond))
	// The API server reconnects to etcd by itself; until then requests may fail.
	if err := poll(ctx, func() error {
		_, err := cms.Get(ctx, "smoke", metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatalf("Get() after etcd restart = %v", err)
	}
}

// TestRBAC checks that under WithRBAC the admin may create and the plain user
// is forbidden.
func TestRBAC(t *testing.T) {
	env := testenv.Start(t, testenv.WithRBAC())
	ctx := t.Context()
	admin, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatalf("NewForConfig() = %v", err)
	}
	user, err := kubernetes.NewForConfig(env.UserConfig())
	if err != nil {
		t.Fatalf("NewForConfig() = %v", err)
	}

	if _, err := admin.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin Create() = %v", err)
	}
	_, err = user.CoreV1().ConfigMaps(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("user List() = %v, want Forbidden", err)
	}
	w, err := user.CoreV1().ConfigMaps(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		if w != nil {
			w.Stop()
		}
		t.Fatalf("user Watch() = %v, want Forbidden", err)
	}
	t.Logf("user watch: %v", err)
}

func containsConfigMap(items []corev1.ConfigMap, name, n string) bool {
	for _, cm := range items {
		if cm.Name == name && cm.Data["n"] == n {
			return true
		}
	}
	return false
}

// firstWatchError opens a watch from rv and returns the error it fails with,
// whether Watch returns it or sends it as the first event; nil if the watch
// delivered anything else first.
func firstWatchError(ctx context.Context, t *testing.T, open func(context.Context, metav1.ListOptions) (watch.Interface, error), rv string) error {
	t.Helper()
	w, err := open(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Logf("the error came from Watch itself")
		return err
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch from %s closed without an event", rv)
		}
		if ev.Type != watch.Error {
			t.Fatalf("watch from %s: first event %s %T, want ERROR", rv, ev.Type, ev.Object)
		}
		t.Logf("the error came as the watch's first event")
		return apierrors.FromObject(ev.Object)
	case <-time.After(deadline):
		t.Fatalf("watch from %s: no event within %v", rv, deadline)
	}
	return nil
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
