FROM scratch
COPY testadapter /testadapter
COPY note.txt /note.txt
ENTRYPOINT ["/testadapter"]
