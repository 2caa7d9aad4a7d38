package k8stest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// The StorageClass's volumes come from a provisioner in the test process,
// in the way of an external (CSI) provisioner on a real cluster: the
// controller manager's binder marks a claim of the class with
// annStorageProvisioner; the provisioner makes a hostPath PersistentVolume
// for it, of the size asked, pre-bound to it, under <dir>/volumes; the
// binder binds the two. A volume released by its deleted claim
// (reclaimPolicy Delete) is deleted with its files.
//
// Why not a pool of pre-made volumes: a pool binds only claims no larger
// than its volumes (the backend asks 10 GiB by default), runs dry, and a
// released volume must be re-made by hand (Recycle is gone), racing the
// binder. A claim-driven provisioner has none of that, and the claims go
// through the same states (Pending, "waiting for a volume to be created by
// the external provisioner", Bound) as on a cluster with a CSI driver.
const (
	provisionerName       = "paddock.local/k8stest-hostpath"
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	annProvisionedBy      = "pv.kubernetes.io/provisioned-by"
)

// provisioner is the StorageClass's provisioner; run is its loop.
type provisioner struct {
	cs  kubernetes.Interface
	dir string    // the volumes' parent directory
	log io.Writer // one line per volume made or deleted, and per error
}

// run watches claims and volumes and reconciles on every change (and each
// second, so a failed call is retried) until ctx ends.
func (p *provisioner) run(ctx context.Context) {
	f := informers.NewSharedInformerFactory(p.cs, 0)
	claims, vols := f.Core().V1().PersistentVolumeClaims(), f.Core().V1().PersistentVolumes()
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{claims.Informer(), vols.Informer()} {
		if _, err := inf.AddEventHandler(h); err != nil {
			p.logf("informer: %v", err)
			return
		}
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	f.WaitForCacheSync(ctx.Done())
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-tick.C:
		}
		p.sync(ctx, claims.Lister(), vols.Lister())
	}
}

// sync deletes the released volumes it made and makes one for each
// pending claim assigned to it that has none yet. The listers may lag: a
// create that exists already and a delete of what is gone are no-ops.
func (p *provisioner) sync(ctx context.Context, cl listersv1.PersistentVolumeClaimLister, vl listersv1.PersistentVolumeLister) {
	pvs, err := vl.List(labels.Everything())
	if err != nil {
		p.logf("list volumes: %v", err)
		return
	}
	have := map[string]bool{}
	for _, pv := range pvs {
		have[pv.Name] = true
		if pv.Annotations[annProvisionedBy] != provisionerName || pv.DeletionTimestamp != nil {
			continue
		}
		if ph := pv.Status.Phase; (ph == corev1.VolumeReleased || ph == corev1.VolumeFailed) &&
			pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
			p.remove(ctx, pv)
		}
	}
	claims, err := cl.List(labels.Everything())
	if err != nil {
		p.logf("list claims: %v", err)
		return
	}
	for _, c := range claims {
		if c.Annotations[annStorageProvisioner] != provisionerName || c.Spec.VolumeName != "" ||
			c.DeletionTimestamp != nil || c.Status.Phase != corev1.ClaimPending {
			continue
		}
		if name := "pvc-" + string(c.UID); !have[name] {
			p.make(ctx, c, name)
		}
	}
}

// make creates the directory and the volume for claim c.
func (p *provisioner) make(ctx context.Context, c *corev1.PersistentVolumeClaim, name string) {
	if c.Spec.VolumeMode != nil && *c.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		p.logf("claim %s/%s: block volumes are not provided", c.Namespace, c.Name)
		return
	}
	dir := filepath.Join(p.dir, name)
	// World-writable, as local-path-provisioner's: the pod's uid is not
	// known here, and hostPath volumes get no fsGroup ownership.
	if err := os.MkdirAll(dir, 0o777); err != nil {
		p.logf("claim %s/%s: %v", c.Namespace, c.Name, err)
		return
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		p.logf("claim %s/%s: %v", c.Namespace, c.Name, err)
		return
	}
	class := StorageClassName
	if c.Spec.StorageClassName != nil {
		class = *c.Spec.StorageClassName
	}
	dirType := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: provisionerName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   c.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              class,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: c.Namespace, Name: c.Name, UID: c.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}},
		},
	}
	if _, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		p.logf("claim %s/%s: create volume %s: %v", c.Namespace, c.Name, name, err)
		return
	}
	p.logf("claim %s/%s: made volume %s", c.Namespace, c.Name, name)
}

// remove deletes a released volume's files, then the volume.
func (p *provisioner) remove(ctx context.Context, pv *corev1.PersistentVolume) {
	if hp := pv.Spec.HostPath; hp != nil && strings.HasPrefix(hp.Path, p.dir+"/") {
		if err := os.RemoveAll(hp.Path); err != nil {
			p.logf("volume %s: %v", pv.Name, err)
			return
		}
	}
	if err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		p.logf("volume %s: delete: %v", pv.Name, err)
		return
	}
	p.logf("volume %s: released, deleted", pv.Name)
}

func (p *provisioner) logf(format string, args ...any) {
	fmt.Fprintf(p.log, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
