package service

import (
	"github.com/gcompose/gcompose/protocol"
)

// refuse says in a state answer that the change cannot succeed, why
// (protocol StateExt.Refuse: plan fails naming the resource and why, deploy
// refuses before any action); nothing for "".
func refuse(res *protocol.StateResult, why string) {
	if why == "" || res == nil {
		return
	}
	if res.Gcompose == nil {
		res.Gcompose = &protocol.StateExt{}
	}
	res.Gcompose.Refuse = &protocol.Refusal{Message: why}
}

// refusedCreate is the answer for a service that cannot be rented because
// its image cannot be found (an unknown image_tag, a registry that does not
// answer): plan fails naming why, and deploy makes nothing, where an error
// would fail only this step and let the deploy make what the service needs
// first (the payments, the VPN).
func refusedCreate(planned string, why error) (*protocol.StateResult, error) {
	res, err := stale(protocol.ChangeCreate, "its image cannot be resolved", nil, planned, nil, "create")
	if err != nil {
		return nil, err
	}
	refuse(res, why.Error())
	return res, nil
}
