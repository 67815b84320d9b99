package host

import (
	"context"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/model"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/sdk"
)

// modelOf is the client of cfg's [model], or, when its API key can't be
// read, a model that answers every question with why, and the problem
// placed at its line.
func modelOf(cfg *config.Config) (runs.Model, config.Errors) {
	m, err := model.New(cfg.Model)
	if err == nil {
		return m, nil
	}
	field := "model"
	switch {
	case cfg.Model.APIKeyEnv != "":
		field = "model.api_key_env"
	case cfg.Model.APIKeyFile != "":
		field = "model.api_key_file"
	}
	e := cfg.ErrorAt(field, err.Error())
	return refusingModel{why: "the model can't be asked: " + e.Error()}, config.Errors{e}
}

// refusingModel answers that the model's config is wrong.
type refusingModel struct{ why string }

func (m refusingModel) Ask(context.Context, sdk.ModelRequest) (sdk.ModelAnswer, error) {
	return sdk.ModelAnswer{}, &sdk.Error{Code: wire.CodeUnsupported, Message: m.why}
}
