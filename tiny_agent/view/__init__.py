"""``tiny-agent view``: one self-contained HTML page per session, and the HTML of ``tiny-agent report``.

- :mod:`.model` reads a journal into a typed view (runs, steps, attempts, tools, panels);
- :mod:`.charts` draws inline SVG; :mod:`.json_html` pretty-prints JSON with dropped fields marked;
- :mod:`.page` is the document (strict Content-Security-Policy, inline CSS); :mod:`.session_page`
  and :mod:`.report_page` fill it.

Everything but :mod:`.model` is pure: values in, escaped HTML out.
"""
