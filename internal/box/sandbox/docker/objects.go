// The objects the docker backend lists and prunes.

package docker

import (
	"context"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	pdkerr "github.com/paddockhq/paddock/internal/base/errdefs"

	"github.com/moby/moby/client"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// List implements sandbox.Backend.
func (b *Backend) List(ctx context.Context) ([]sandbox.Object, error) {
	f := make(client.Filters).Add("label", sandbox.LabelManaged+"=1", sandbox.LabelOwner+"="+b.cfg.Owner)
	cs, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, mapErr("list boxes", err)
	}
	var out []sandbox.Object
	for _, c := range cs.Items {
		out = append(out, sandbox.Object{Kind: sandbox.KindBox, ID: c.ID, Session: c.Labels[sandbox.LabelSession], Labels: c.Labels})
	}
	vs, err := b.cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return nil, mapErr("list volumes", err)
	}
	for _, v := range vs.Items {
		out = append(out, sandbox.Object{Kind: sandbox.KindVolume, ID: v.Name, Session: v.Labels[sandbox.LabelSession], Labels: v.Labels})
	}
	ns, err := b.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, mapErr("list networks", err)
	}
	for _, n := range ns.Items {
		out = append(out, sandbox.Object{Kind: sandbox.KindNetwork, ID: n.ID, Session: n.Labels[sandbox.LabelSession], Labels: n.Labels})
	}
	return out, nil
}

// RemoveObject implements sandbox.Backend.
func (b *Backend) RemoveObject(ctx context.Context, o sandbox.Object) error {
	switch o.Kind {
	case sandbox.KindBox:
		_, err := b.cli.ContainerRemove(ctx, o.ID, client.ContainerRemoveOptions{Force: true})
		if err == nil && o.Labels[labelWorkspace] != "" {
			b.dropWorkspaceMount(o.Session)
		}
		if cerrdefs.IsNotFound(err) || err != nil && strings.Contains(err.Error(), "already in progress") {
			return nil
		}
		return mapErr("remove box", err)
	case sandbox.KindVolume:
		return b.removeVolume(ctx, o.ID)
	case sandbox.KindNetwork:
		_, err := b.cli.NetworkRemove(ctx, o.ID, client.NetworkRemoveOptions{})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		return mapErr("remove network", err)
	}
	return fmt.Errorf("object kind %q: %w", o.Kind, pdkerr.ErrInvalid)
}
