"""Images a request carries or points at: fetched safely, decoded, hashed.

`fetch.py` fetches an `http(s)` URL with every guard a server that fetches on a user's
behalf needs (the address each name resolves to, after every redirect; size, time and
redirect limits; the content type); `images.py` decodes bytes into an `ImageInput`;
`loader.py` turns a request's image references (`data:`, `http(s)`, `file:` URLs) into
images, concurrently and off the event loop.
"""
