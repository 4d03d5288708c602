package testenv_test

import (
	"bytes"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/resumable-go/resumable/adapters/k8s/internal/testenv"
	"github.com/resumable-go/resumable/internal/testkit/kubetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRBAC checks the configurations against a real server: under WithRBAC
// a clientset of Config (the admin) may create, and one of UserConfig is
// forbidden to list and to watch. The process-level harness is tested in
// internal/testkit/kubetest.
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

// TestRESTConfig: the configuration carries the access as it is, with
// client-go's rate limit raised.
func TestRESTConfig(t *testing.T) {
	a := kubetest.Access{Host: "https://127.0.0.1:6443", CAData: []byte("PEM"), BearerToken: "token"}
	cfg := testenv.RESTConfig(a)
	if cfg.Host != a.Host || cfg.BearerToken != a.BearerToken || !bytes.Equal(cfg.CAData, a.CAData) {
		t.Errorf("RESTConfig(%+v) = host %q, token %q, CA %q; want the access's", a, cfg.Host, cfg.BearerToken, cfg.CAData)
	}
	if cfg.QPS != 50 || cfg.Burst != 100 {
		t.Errorf("RESTConfig() QPS, Burst = %v, %d; want 50, 100", cfg.QPS, cfg.Burst)
	}
}
