package service

import "github.com/gcompose/gcompose/protocol"

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
