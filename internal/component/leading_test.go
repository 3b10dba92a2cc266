package component_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/component"
	"github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestRunLeadingLostLease: another holder takes the Lease while this one
// leads. Without Recampaign, RunLeading ends with ErrLeadershipLost, as a
// component in its own process exits; with it (the components inside
// `skiff server`), the term's context ends and run runs again once the
// Lease is won back, and RunLeading goes on until its own context ends.
func TestRunLeadingLostLease(t *testing.T) {
	cluster := apiserver.Start(t)
	client := cluster.Clientset()
	for _, recampaign := range []bool{false, true} {
		t.Run(map[bool]string{false: "exits", true: "recampaigns"}[recampaign], func(t *testing.T) {
			lease := "leading-test-" + map[bool]string{false: "exits", true: "recampaigns"}[recampaign]
			e := component.Election{
				Name: "test", Work: "work", Client: client, Namespace: "kube-system", Lease: lease, Identity: "me",
				LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
				Recampaign: recampaign,
			}
			terms := make(chan context.Context, 4)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- component.RunLeading(ctx, e, func(term context.Context) error {
					terms <- term
					<-term.Done()
					return nil
				})
			}()
			var first context.Context
			select {
			case first = <-terms:
			case <-time.After(30 * time.Second):
				t.Fatal("never led")
			}
			// Another holder takes the Lease, as a second server would
			// once this one failed to renew in time.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
				if err != nil {
					return err
				}
				l.Spec.HolderIdentity = ptr.To("thief")
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				_, err = client.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-first.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the term did not end when the Lease was taken")
			}
			if !recampaign {
				select {
				case err := <-done:
					if !errors.Is(err, component.ErrLeadershipLost) {
						t.Fatalf("RunLeading returned %v, want ErrLeadershipLost", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("RunLeading did not return after the Lease was lost")
				}
				return
			}
			// The thief never renews: the Lease expires and is won back.
			select {
			case <-terms:
			case err := <-done:
				t.Fatalf("RunLeading returned %v instead of campaigning again", err)
			case <-time.After(30 * time.Second):
				t.Fatal("no second term")
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("RunLeading returned %v after its context ended", err)
			}
		})
	}
}

// TestRunLeadingStopping: an error run returns because the process is
// stopping (its informers stopped under it) is not the component's
// failure: RunLeading returns nil once its context has ended.
func TestRunLeadingStopping(t *testing.T) {
	cluster := apiserver.Start(t)
	e := component.Election{
		Name: "test", Work: "work", Client: cluster.Clientset(), Namespace: "kube-system", Lease: "stopping-test", Identity: "me",
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	err := component.RunLeading(ctx, e, func(term context.Context) error {
		cancel()
		<-term.Done()
		return errors.New("handler was not added to shared informer because it has stopped already")
	})
	if err != nil {
		t.Fatalf("RunLeading returned %v after its context ended, want nil", err)
	}
}
