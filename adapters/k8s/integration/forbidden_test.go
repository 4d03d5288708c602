package integration_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/adapters/k8s/internal/testenv"
)

// TestForbidden watches as a user that RBAC forbids to: ours and client-go's
// RetryWatcher each make one watch call, deliver one watch.Error event with
// the server's 403 Forbidden Status, and stop.
func TestForbidden(t *testing.T) {
	env := testenv.Start(t, testenv.WithRBAC())
	admin := newClient(t, env.Config())
	user := newClient(t, env.UserConfig())
	ns := metav1.NamespaceDefault
	rv := listRV(t, admin.CoreV1().ConfigMaps(ns))

	var oursRec, upRec recorder
	rw, ours := startOurs(t, rv, oursRec.listWatch(user.CoreV1().ConfigMaps(ns)))
	_, up := startUpstream(t, rv, upRec.listWatch(user.CoreV1().ConfigMaps(ns)))

	want := []event{{Type: watch.Error, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden}}
	statuses := map[string]*metav1.Status{}
	for _, w := range []struct {
		name string
		c    *consumer
		rec  *recorder
	}{
		{name: "ours", c: ours, rec: &oursRec},
		{name: "client-go", c: up, rec: &upRec},
	} {
		waitFor(t, w.name+" to stop", func() (bool, string) {
			return w.c.Closed(), fmt.Sprintf("events: %v; calls: %s", summarizeAll(w.c.Events()), describeCalls(w.rec.Calls()))
		})
		events := w.c.Events()
		if diff := cmp.Diff(want, summarizeAll(events)); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", w.name, diff)
			continue
		}
		statuses[w.name] = events[0].Object.(*metav1.Status)
		t.Logf("%s: %s", w.name, statuses[w.name].Message)
		calls := w.rec.Calls()
		if len(calls) != 1 || !apierrors.IsForbidden(calls[0].Err) {
			t.Errorf("%s: watch calls: %s; want one, Forbidden", w.name, describeCalls(calls))
		}
	}
	select {
	case <-rw.Done():
	default:
		t.Errorf("ours: ResultChan closed but Done is not")
	}
	if ours, up := statuses["ours"], statuses["client-go"]; ours != nil && up != nil {
		if diff := cmp.Diff(up, ours); diff != "" {
			t.Errorf("Status, client-go's (-) and ours (+):\n%s", diff)
		}
	}
}
