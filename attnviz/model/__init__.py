"""The model floor: the from-scratch attention, encoders and decoders (torch lives here),
their torch-free configs and families, the weight loader, and where a model is found.
Imports only the text and ground floors."""
