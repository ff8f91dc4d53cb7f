package web

import "net/http"

// BoardPage returns the handler of a dashboard's page (static/board.html),
// the viewer and editor of the dashboards kept by internal/dashboard. The
// page holds no data: it reads its dashboard and values through the API.
func (s *Server) BoardPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		a, ok := s.assets["/static/board.html"]
		if !ok {
			http.Error(w, "dashboard page missing", http.StatusInternalServerError)
			return
		}
		a.serve(w, r)
	})
}

// PicturePage returns the handler of the process pictures' page
// (static/picture.html): the list, the viewer with its faceplates, and the
// editor. Like the dashboards' page it holds no data.
func (s *Server) PicturePage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		a, ok := s.assets["/static/picture.html"]
		if !ok {
			http.Error(w, "picture page missing", http.StatusInternalServerError)
			return
		}
		a.serve(w, r)
	})
}
