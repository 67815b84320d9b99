package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/tools"
)

// toolList is a tool list in a format: the body of GET /api/v1/tools and
// of the websocket's tools frame (with type and id).
type toolList struct {
	Type      string           `json:"type,omitempty"`
	ID        string           `json:"id,omitempty"`
	Format    string           `json:"format"`
	Strict    bool             `json:"strict,omitempty"`
	Tools     []any            `json:"tools"`
	NotStrict []wire.NotStrict `json:"not_strict,omitempty"`
}

// visibleTools are the tools a caller is shown: the session tools only to
// a role that may use them, while sessions are served.
func (s *Server) visibleTools(id auth.Identity) []*tools.Tool {
	show := s.showsSessions(id)
	list := s.opts.Registry.List()
	out := make([]*tools.Tool, 0, len(list))
	for _, t := range list {
		if s.inSession(t) && !show {
			continue
		}
		out = append(out, t)
	}
	return out
}

// toolList is the caller's tools in a format ("" for the default); a
// format not known, or strict with another than openai, is an error
// saying what is taken.
func (s *Server) toolList(id auth.Identity, format string, strict bool) (toolList, error) {
	specs, notStrict, err := tools.Specs(s.visibleTools(id), format, strict)
	if err != nil {
		return toolList{}, err
	}
	if format == "" {
		format = tools.FormatToolhost
	}
	return toolList{Format: format, Strict: strict, Tools: specs, NotStrict: notStrict}, nil
}

// writeToolList answers GET /api/v1/tools: ?format= (toolhost, the
// default; openai; anthropic; mcp) and, with openai, ?strict=true.
func (s *Server) writeToolList(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	format, strict, err := listQuery(r.URL.Query())
	if err == nil {
		var list toolList
		if list, err = s.toolList(id, format, strict); err == nil {
			writeJSON(w, http.StatusOK, list)
			return
		}
	}
	writeError(w, http.StatusBadRequest, wire.CodeBadRequest, err.Error())
}

// listQuery reads ?format= and ?strict= of a tools listing.
func listQuery(q url.Values) (format string, strict bool, err error) {
	format = q.Get("format")
	if v := q.Get("strict"); v != "" {
		if strict, err = strconv.ParseBool(v); err != nil {
			return "", false, fmt.Errorf("strict must be true or false, not %q", v)
		}
	}
	return format, strict, nil
}

// listTools answers list_tools with a tools frame in the format asked
// for, or says what is wrong with it.
func (c *wsConn) listTools(m wire.Message) {
	list, err := c.s.toolList(c.who(), m.Format, m.Strict)
	if err != nil {
		c.send(badFrame(m.ID, err.Error()))
		return
	}
	list.Type, list.ID = wire.TypeTools, m.ID
	c.send(list)
}
